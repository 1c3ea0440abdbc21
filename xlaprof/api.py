"""Analysis entry points shared by the CLI and Python/notebook users.

``analyze_parts`` runs the analyzers on each loaded part and adds the step timeline and, for
traces of several hosts, the per-host step-time skew.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from xlaprof.analyze import run_analyzers
from xlaprof.findings import Finding
from xlaprof.inputs import DEFAULT_MAX_INPUT_BYTES

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.loading import Part


@dataclass
class PartResult:
    part: Part
    findings: list[Finding]
    timeline: pd.DataFrame | None = None
    host_skew: pd.DataFrame | None = None


def analyze_parts(parts: list[Part]) -> list[PartResult]:
    from xlaprof.analyze.hosts import host_skew
    from xlaprof.analyze.timeline import step_timeline

    results = []
    for part in parts:
        result = PartResult(part, run_analyzers(part.data))
        trace = part.trace
        if trace is None and part.run is not None and part.run.trace_files():
            from xlaprof.trace import load_trace

            window = part.run.info.trace_steps
            trace = load_trace(part.run.path, first_step=window[0] if window else 0)
        if part.data.steps or trace is not None:
            result.timeline = step_timeline(
                part.data.steps,
                None if trace is None else trace.events,
                None if trace is None else trace.step_bounds,
            )
        if trace is not None and len(trace.hosts) > 1:
            result.host_skew = host_skew(trace.step_times())
        results.append(result)
    return results


def analyze(*paths: str | os.PathLike[str], warmup_steps: int = 2) -> list[Finding]:
    """Findings for report/log files, run directories or trace logdirs, most severe first."""
    from xlaprof.loading import load_parts

    parts = load_parts([Path(p) for p in paths], DEFAULT_MAX_INPUT_BYTES, warmup_steps)
    return [f for result in analyze_parts(parts) for f in result.findings]
