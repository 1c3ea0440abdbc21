"""The analysis, end to end: paths -> parts -> findings and tables -> results.

``analyze_parts`` runs the analyzers on each loaded part and adds the tables made from its steps
and trace (step timeline, per-host skew and steps, stragglers); its ``PartResult`` list is what
every renderer takes. ``check_budgets`` does the same for ``xlaprof check`` and judges the
budgets. The CLI, the Python facade (``xlaprof.api``) and the fix benchmarks all call these, so
one analysis stands behind every output.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from xlaprof.analyzers import run_analyzers
from xlaprof.inputs.paths import DEFAULT_MAX_INPUT_BYTES, load_parts
from xlaprof.inputs.sourcefiles import recorded_root, source_roots, withheld, withheld_note
from xlaprof.model.result import PartResult, RunComparison

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.budgets import Budgets, CheckResult
    from xlaprof.findings import Finding
    from xlaprof.model.parts import Part
    from xlaprof.model.trace import Trace

# Where findings may quote source lines from: a folder, or a function choosing one per part
# (``xlaprof mcp``: inside its allowed roots only); None: a run's recorded working directory.
SourceRoot = str | os.PathLike[str] | Callable[["Part"], str | os.PathLike[str] | None] | None


def source_root_of(part: Part, source_root: SourceRoot) -> str | os.PathLike[str] | None:
    """The folder whose source files findings on ``part`` may quote (see ``SourceRoot``)."""
    if callable(source_root):
        return source_root(part)
    if source_root is not None:
        return source_root
    if part.run is not None:
        return recorded_root(part.run.info.cwd)  # a real project folder only
    return None


def analyze_parts(parts: list[Part], source_root: SourceRoot = None) -> list[PartResult]:
    """Analyze each part. Source lines are read only under ``source_root`` (default: a run's
    recorded working directory, if it exists here; see ``xlaprof.inputs.sourcefiles``)."""
    return [_analyze_part(part, source_root) for part in parts]


def _analyze_part(part: Part, source_root: SourceRoot) -> PartResult:
    from xlaprof.tables.hosts import host_skew
    from xlaprof.tables.story import step_story, with_bounds, worth_most
    from xlaprof.tables.stragglers import stragglers
    from xlaprof.tables.timeline import device_busy_by_step, step_timeline

    trace = part.trace if part.trace is not None else _trace_window(part)
    part.data.trace = trace  # the capture's analyzers read its device model
    if trace is not None:
        _host_side(part, trace)
    with source_roots(source_root_of(part, source_root)) as roots:
        result = PartResult(part, run_analyzers(part.data))
        note_withheld(part, roots)
    result.host_activity = part.data.host_activity
    if part.data.torch_traces:
        from xlaprof.tables.torch_compiles import compile_table

        result.torch_compiles = compile_table(part.data.torch_traces, part.data.dynamo)
    if part.data.steps or trace is not None:
        view = trace  # what the step timeline reads: a pod's first host, from its own files
        if trace is not None and trace.source is not None:
            from xlaprof.inputs.pod import first_host_trace

            view = first_host_trace(trace)
        events = None if view is None else view.events
        busy = windows = None
        if view is not None and events is not None:
            busy = device_busy_by_step(view.tracing_vs_device(), events)
            windows = _device_windows(view)
        timeline = step_timeline(
            part.data.steps,
            events,
            None if view is None else view.step_bounds,
            busy,
            windows,
        )
        # the one step model: every per-step verdict and the story come from these bounds
        bottleneck = None if view is None else view.summary().bottleneck
        host = None if trace is None or not trace.hosts else trace.hosts[0]
        result.timeline = with_bounds(timeline, part.data.warmup_steps, bottleneck, host)
        result.story = step_story(result.timeline, part.data.warmup_steps)
        if result.story is not None:
            result.story.worth_most = worth_most(result.story, result.findings)
        del view
    if trace is not None and len(trace.hosts) > 1:
        from xlaprof.inputs import pod as pods

        if trace.source is not None:  # a range of steps at a time; the per-host rows stay on disk
            result.host_skew, result.stragglers = pods.step_tables(trace)
        else:
            result.host_skew = host_skew(trace.step_times())
            result.host_steps = pods.host_steps(trace)
            result.stragglers = stragglers(result.host_steps)
    result.trace = trace
    return result


def _host_side(part: Part, trace: Trace) -> None:
    """What a capture's host says where it has no device (``tables.host_steps``), and the
    TORCH_TRACE compiles of the same run placed in the steps the capture shows."""
    from xlaprof.tables.host_steps import host_activity, place_compiles

    part.data.host_activity = host_activity(trace)
    if part.data.torch_traces:
        place_compiles(part.data.dynamo, part.data.torch_traces, trace)


def _device_windows(trace: Trace) -> pd.DataFrame | None:
    """Per host step from the devices' own steps (hosts without step markers): the slowest
    device's window (``Trace.step_times()``) with that device's busy time, or None."""
    windows = trace.step_times()
    windows = windows[windows["source"] != "host steps"]
    if windows.empty:
        return None
    per_device = trace.step_times(per_device=True)[["host", "device", "step", "busy_ms"]]
    per_device = per_device.astype({"host": str, "device": str})
    windows = windows.astype({"host": str, "device": str})
    return windows.merge(per_device, on=["host", "device", "step"], how="left")


def note_withheld(part: Part, roots: tuple[Path, ...]) -> None:
    """Say in the part's warnings (console notes, ``--json``, HTML) which source files exist
    here but were not quoted, and how to allow them (``xlaprof.inputs.sourcefiles``)."""
    from xlaprof.parse.metrics_report import ParseWarning

    note = withheld_note(withheld(), roots)
    if note is None:
        return
    if part.run_summary is not None:
        part.run_summary.warnings.append(note)
    elif part.sources:
        part.sources[0].warnings.append(ParseWarning(line=0, text="", reason=note))


def _trace_window(part: Part) -> Trace | None:
    """The trace a run directory captured (``--trace-steps``), or None."""
    if part.run is None or not part.run.trace_files():
        return None
    from xlaprof.inputs.traces import load_trace

    return load_trace(part.run.path)  # steps numbered from the run's trace window


def findings_of(
    paths: list[Path], warmup_steps: int = 2, source_root: SourceRoot = None
) -> list[Finding]:
    """The findings of every part of ``paths``, most severe first within each part."""
    parts = load_parts(paths, DEFAULT_MAX_INPUT_BYTES, warmup_steps)
    return [f for result in analyze_parts(parts, source_root) for f in result.findings]


def analyze_one(
    path: Path,
    process: str | None = None,
    warmup_steps: int = 2,
    session: str | None = None,
    source_root: SourceRoot = None,
) -> tuple[PartResult, list[str], str | None]:
    """One process of ``path`` analyzed (the first, or ``process``): its result, the names of
    every process found, and a note saying which one was chosen when there were several."""
    from xlaprof.errors import RunDirError

    parts = load_parts([path], DEFAULT_MAX_INPUT_BYTES, warmup_steps, session)
    if process is not None:
        parts = [p for p in parts if p.name == process]
        if not parts:
            raise RunDirError(f"{path}: no process run named {process!r}")
    names = [p.name for p in parts]
    note = None
    if len(parts) > 1:
        note = (
            f"{path} holds {len(parts)} process runs ({', '.join(names[:8])}"
            f"{', ...' if len(parts) > 8 else ''}): showing {parts[0].name} only; "
            "pass process=NAME (--process NAME) for another"
        )
    return analyze_parts(parts[:1], source_root)[0], names, note


def compare_runs(
    before: Path, after: Path, source_root: SourceRoot = None
) -> tuple[RunComparison, list[str]]:
    """``xlaprof diff``: the first process of each run analyzed, their figures side by side and
    the findings that went and came; with the notes saying which process was shown."""
    from xlaprof.tables.compare import compare, match_findings, run_summary

    a, _, note_a = analyze_one(before, source_root=source_root)
    b, _, note_b = analyze_one(after, source_root=source_root)
    table = compare(run_summary(a.part.data), run_summary(b.part.data))
    gone, came = match_findings(a.findings, b.findings)
    notes = [note for note in (note_a, note_b) if note]
    return RunComparison(str(before), str(after), table, gone, came), notes


def check_budgets(
    paths: list[Path], budgets: Budgets, source_root: SourceRoot = None
) -> CheckResult:
    """Load ``paths`` (and the budgets' baseline), find what is wrong, check ``budgets``."""
    from xlaprof.budgets import evaluate
    from xlaprof.errors import BudgetError

    budgets.validate()
    if not paths:
        raise BudgetError("no run to check")

    def results(path: Path) -> list[PartResult]:
        # Budgets read findings and per-step rows only: no trace is loaded, no timeline built.
        parts = load_parts([path], DEFAULT_MAX_INPUT_BYTES, budgets.warmup_steps)
        checked = []
        for part in parts:
            with source_roots(source_root_of(part, source_root)) as roots:
                checked.append(PartResult(part, run_analyzers(part.data)))
                note_withheld(part, roots)
        return checked

    checked = [result for path in paths for result in results(path)]
    baseline = None if budgets.baseline is None else results(budgets.baseline)
    return evaluate(budgets, checked, baseline)
