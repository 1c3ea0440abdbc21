"""Eager mode: every op compiled and executed as its own graph, with no fusion across ops.

``torch_xla.experimental.eager_mode(True)`` (the torch_xla guide's debugging mode, and the
default of eager-first stacks) runs each op as it is called. torch_xla then records nothing in
``CompileTime``/``ExecuteTime``: per-op compiles and executions go to ``EagerOpCompileTime`` and
``EagerOpExecuteTime`` (read from the final metrics report, or per step from a run directory).
A training step run that way dispatches hundreds of tiny graphs; wrapped in ``torch_xla.compile``
it is traced into one graph and compiled once, even with eager mode left on.

Fires when the steady steps run at least ``EAGER_MIN_OPS_PER_STEP`` eager op executions each:
a script that keeps eager mode on but compiles its step still runs a few ops eagerly (its
inputs' ``randint``/``.to``: 2 executions a step on the eager_mode_gpt2 set-up, against 745 with
the whole step eager; ``benchmarks/eager_mode.py``). Located at the call that turned eager mode on
(recorded by the session, or the one ``eager_mode(True)`` in the script's source).
"""

from __future__ import annotations

import statistics

from xlaprof.analyzers.shared.sourcecode import calls_with_true
from xlaprof.findings import Finding, Kind, Location, Severity
from xlaprof.model.input import EAGER_COMPILE_METRICS, EAGER_EXECUTE_METRICS, AnalysisInput
from xlaprof.parse.frames import is_library_file
from xlaprof.parse.units import format_seconds

# Eager op executions per steady step at which eager mode is the step's cost, not a few inputs.
EAGER_MIN_OPS_PER_STEP = 20
_EAGER_CALL = "eager_mode"

SUGGESTION = (
    "Eager mode runs each op as its own small graph: no fusion, one dispatch per op. Compile "
    "the training step instead: wrap it as `train_step = torch_xla.compile(train_step)` "
    "(traced into one graph and compiled once, even with eager mode on), or turn eager mode "
    "off for training (`torch_xla.experimental.eager_mode(False)`) and end each step with "
    "`torch_xla.sync()`. Keep eager mode for debugging single ops."
)


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not have looked at ``data``, or None.

    A metrics report says whether eager ops ran (torch_xla omits metrics with no samples), and
    so does a run directory that recorded eager mode at its steps.
    """
    if data.reports or data.eager_mode is not None:
        return None
    if any(s.eager is not None for s in data.steps):
        return None
    return "needs a metrics report or a run that recorded eager mode"


def analyze(data: AnalysisInput) -> list[Finding]:
    executions = data.eager_executions()
    if not executions:
        return []
    steps = data.step_count()
    per_step = _steady_per_step(data)
    if per_step is None and steps:
        per_step = executions / steps
    if per_step is None or per_step < EAGER_MIN_OPS_PER_STEP:
        return []
    compiles = data.eager_compiles()
    compile_s = _seconds(data, EAGER_COMPILE_METRICS, "eager_compile_s")
    execute_s = _seconds(data, EAGER_EXECUTE_METRICS, "eager_execute_s")
    evidence: dict[str, object] = {
        "eager_op_executions": executions,
        "eager_op_compiles": compiles,
        "eager_compile_seconds": None if compile_s is None else round(compile_s, 6),
        "eager_execute_seconds": None if execute_s is None else round(execute_s, 6),
        "steps": steps,
        "op_executions_per_step": round(per_step, 1),
        "graph_compiles": data.graph_compiles(),
        "eager_mode_site": data.eager_mode_site,
    }
    title = (
        f"Eager mode: each op runs as its own graph, {per_step:.0f} op executions per step"
        + (f", {compiles} per-op compiles" if compiles else "")
        + (f" ({format_seconds(compile_s)})" if compile_s else "")
    )
    return [
        Finding(
            kind=Kind.EAGER_MODE,
            severity=Severity.WARNING,
            title=title,
            evidence=evidence,
            location=_location(data),
            suggestion=SUGGESTION,
        )
    ]


def _steady_per_step(data: AnalysisInput) -> float | None:
    """Median eager op executions of the steps after warm-up, from per-step rows."""
    rows = [s for s in data.steps if s.eager_executions is not None]
    counts = [s.eager_executions for s in rows if s.eager_executions is not None]
    if not counts:
        return None
    first = data.first_steady_step()
    steady = [c for s, c in zip(rows, counts, strict=True) if s.step >= first] or counts
    return float(statistics.median(steady))


def _seconds(data: AnalysisInput, names: tuple[str, ...], field: str) -> float | None:
    if data.reports:
        value = data.metric_total(*names)
        if value is not None:
            return value
    values = [getattr(s, field) for s in data.steps if getattr(s, field) is not None]
    return sum(values) if values else None


def _location(data: AnalysisInput) -> Location | None:
    """The user's call that turned eager mode on, recorded or found in the script's source."""
    site = data.eager_mode_site
    if site:
        file, _, line = site.rpartition(":")
        if file and line.isdigit() and not is_library_file(file):
            return Location(file, int(line))
    if data.script:
        lines = calls_with_true(data.sources, data.script, _EAGER_CALL)
        if len(lines) == 1:
            return Location(data.script, lines[0])
    return None
