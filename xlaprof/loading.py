"""Dispatch command-line paths to the right loader: report/log files or run directories.

Files are one job's output and make one analysis part. A run folder may hold several process
runs (one per rank); each is analyzed on its own, since steps and warm-up are per process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xlaprof.analyze.data import AnalysisInput
from xlaprof.errors import InputNotRecognized
from xlaprof.inputs import SourceInfo, load_text_inputs
from xlaprof.run import Run, find_runs, load_runs
from xlaprof.trace import Trace


@dataclass
class Part:
    """One analysis unit: a set of text files, or one process's run directory."""

    name: str
    data: AnalysisInput
    sources: list[SourceInfo]
    run: Run | None = None
    trace: Trace | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _is_trace_dir(path: Path) -> bool:
    return path.is_dir() and not find_runs(path) and any(path.rglob("*.xplane.pb"))


def load_parts(paths: list[Path], max_bytes: int, warmup_steps: int = 2) -> list[Part]:
    if paths and all(_is_trace_dir(p) for p in paths):
        return [_trace_part(p) for p in paths]
    run_roots = [p for p in paths if p.is_dir() and find_runs(p)]
    if not run_roots:
        data, sources = load_text_inputs(paths, max_bytes)
        data.warmup_steps = warmup_steps
        return [Part(name="files", data=data, sources=sources)]
    if len(run_roots) != len(paths):
        others = [str(p) for p in paths if p not in run_roots]
        raise InputNotRecognized(
            f"{others[0]}: give either run directories or report/log files, not both"
        )
    runs = [run for root in run_roots for run in load_runs(root)]
    # A launcher process that never ran a step (xmp.spawn's parent) has nothing to say.
    active = [r for r in runs if r.info.steps_recorded or r.step_rows()] or runs
    parts = []
    for run in active:
        data = run.analysis_input(warmup_steps)
        source = SourceInfo(
            path=str(run.path),
            kinds=["run"],
            reports=len(data.reports),
            debug_events=len(data.debug.events),
            warnings=data.debug.warnings,
        )
        parts.append(
            Part(
                name=run.path.name,
                data=data,
                sources=[source],
                run=run,
                extra={"run": _run_summary(run)},
            )
        )
    return parts


def _trace_part(path: Path) -> Part:
    """A logdir of captured traces (``xlaprof capture``): timeline and host skew only."""
    from xlaprof.trace import load_trace

    trace = load_trace(path)
    trace.partial_edges = True
    source = SourceInfo(path=str(path), kinds=["trace"], reports=0, debug_events=0)
    extra = {
        "trace": {"path": str(path), "hosts": trace.hosts, "files": [str(f) for f in trace.files]}
    }
    return Part(name=path.name, data=AnalysisInput(), sources=[source], trace=trace, extra=extra)


def _run_summary(run: Run) -> dict[str, Any]:
    info = run.info
    return {
        "path": str(run.path),
        "schema": info.schema,
        "status": info.status,
        "exit_code": info.exit_code,
        "detail": info.detail,
        "steps_recorded": info.steps_recorded,
        "device_kind": info.device_kind,
        "device_count": info.device_count,
        "rank": info.rank,
        "torch_xla_version": info.torch_xla_version,
        "traces": [str(p) for p in run.trace_files()],
        "warnings": info.warnings,
    }
