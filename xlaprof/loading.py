"""Dispatch command-line paths to the right loader: report/log files or run directories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xlaprof.analyze.data import AnalysisInput
from xlaprof.inputs import SourceInfo, load_text_inputs


def load_paths(
    paths: list[Path], max_bytes: int
) -> tuple[AnalysisInput, list[SourceInfo], dict[str, Any]]:
    """Load every path; run directories and text files may not be mixed in one call."""
    return (*load_text_inputs(paths, max_bytes), {})
