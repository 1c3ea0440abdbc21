"""``xlaprof.analyze(path)``: the findings for files or run directories, from Python."""

from __future__ import annotations

import os
from pathlib import Path

from xlaprof.analyze import run_analyzers
from xlaprof.findings import Finding
from xlaprof.inputs import DEFAULT_MAX_INPUT_BYTES


def analyze(*paths: str | os.PathLike[str], warmup_steps: int = 2) -> list[Finding]:
    """Findings for report/log files or run directories, most severe first."""
    from xlaprof.loading import load_paths

    data, _sources, _extra = load_paths([Path(p) for p in paths], DEFAULT_MAX_INPUT_BYTES)
    data.warmup_steps = warmup_steps
    return run_analyzers(data)
