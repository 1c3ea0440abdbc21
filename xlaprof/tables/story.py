"""The run's one step model: each step's wall time split into the parts that were measured, what
bounds the step, and where a steady step's time goes.

Every per-step verdict xlaprof shows comes from here, so the step timeline, the story a report
opens with, "worth most" and the step chart cannot disagree. A step's wall time is split into
parts, each measured, each from a named source (``PART_SOURCES``):

- ``compile``: compiling (the ``CompileTime`` metric; in a trace, ``XLAGraphExecutor::Compile``,
  or where no lazy-tensor runtime runs, the PJRT client's compile: ``tables.timeline``);
- ``transfer``: host-device copies (``TransferToDeviceTime``/``TransferFromDeviceTime``; in a
  trace, the transfer spans: a read's copy waits for the device to finish the graph first);
- ``tracing``: the stepping thread's own CPU time, its Python, lazy tracing and graph build at
  the sync (metrics: its CPU clock, read at each boundary; a trace alone measures only the
  graph build, ``SyncTensorsGraphInternal``);
- ``device``: the host waiting on the device: a trace's ``WaitDeviceOps``, or device execution
  in the step (the run's ``ExecuteTime``, traced or not; a capture alone: its busiest device)
  up to the step time no other part took (the host cannot have waited longer than it was not
  otherwise busy). A capture with no device plane (XLA's CPU client: JAX on CPU, torch_xla's
  CPU PJRT) has no device to wait on: the busy time the device model gives its "device" is the
  host CPU's own XLA ops, so there only ``WaitDeviceOps`` and ``ExecuteTime`` measure this
  part; without them it is not measured (the busy time stays in the timeline's
  ``device_busy_s``);
- ``unattributed``: the rest of the wall time: measured as a duration, but not what it was
  spent on (blocked on I/O, on another thread, preempted, or untraced Python). Shown as such,
  never named as a cause.

Parts can overlap (a thread's CPU clock runs inside a transfer it waits in): they take the
wall time in ``PARTS`` order, each at most what is left, so they always add up to the wall.

A step's ``bound`` is its largest measured part and ``bound_share`` that part's share of the
step's wall time: a description of the step, not a finding. Whether it is worth a fix is the
analyzers' call, with their own thresholds; the story names the finding worth most (by cost).
A step is steady when it comes after warm-up and compiled nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from xlaprof.findings import Cost, Finding, Kind
from xlaprof.model.result import StepStory
from xlaprof.parse.units import as_float, format_seconds
from xlaprof.tables.timeline import steady_median

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from xlaprof.rundir.schema import StepRow

# Plain words for each bound (console, HTML).
BOUND_WORDS = {
    "compile": "compiling",
    "tracing": "host CPU (Python, lazy tracing, graph build)",
    "input": "waiting for input data",
    "transfer": "host-device transfers",
    "device": "waiting on the device",
    "host": "other host work (the device idle)",
}
# The measured parts of a step, in the order they take its wall time (module docstring).
PARTS = ("compile", "transfer", "tracing", "device")
UNATTRIBUTED = "unattributed"
# The parts of a step's wall time (``with_bounds``' part columns), in words.
PART_WORDS = {
    "compile": "compiling",
    "tracing": "host CPU (Python + tracing)",
    "transfer": "transfers",
    "device": "waiting on the device",
    UNATTRIBUTED: "unattributed",
}
# Where each part of a step comes from, by the row's ``source`` (the timeline's).
PART_SOURCES = {
    "metrics": {
        "compile": "metrics (CompileTime)",
        "transfer": "metrics (TransferToDeviceTime, TransferFromDeviceTime)",
        "tracing": "metrics (the stepping thread's CPU clock)",
        "device": "metrics (ExecuteTime)",
    },
    "trace": {
        "compile": "trace (XLAGraphExecutor::Compile; without torch_xla: the PJRT client's "
        "compile, PJRT_Client_Compile)",
        "transfer": "trace (transfer spans)",
        "tracing": "metrics (the stepping thread's CPU clock) and trace (graph build)",
        "device": "trace (WaitDeviceOps) and metrics (ExecuteTime; a capture alone with "
        "device planes: the busiest device's busy time)",
    },
}
STORY_COLUMNS = ("bound", "bound_share", "steady")
# The step model's columns the timeline gets (``with_bounds``): each part's seconds.
PART_COLUMNS = tuple(f"part_{name}_s" for name in (*PARTS, UNATTRIBUTED))


def with_bounds(
    timeline: pd.DataFrame, warmup_steps: int, device_planes: bool = True
) -> pd.DataFrame:
    """``timeline`` with the step model: each part's seconds (``PART_COLUMNS``), ``bound``,
    ``bound_share`` (from measured parts only) and ``steady`` (after warm-up, compiling
    nothing). ``device_planes``: False where the trace has no device plane, so that its
    ``device_busy_s`` (the host CPU's XLA ops) is not taken for waiting on a device (module
    docstring)."""
    frame = timeline.copy()
    parts = _parts_columns(frame, device_planes)
    for name, column in zip((*PARTS, UNATTRIBUTED), PART_COLUMNS, strict=True):
        frame[column] = parts[name]
    bounds, shares = _bound_columns(parts, _column(frame, "wall_s"))
    frame["bound"] = bounds
    # a list with None where not measured, so the column's type is inferred as before
    frame["bound_share"] = [None if share != share else share for share in shares.tolist()]
    compiled = frame["compile_s"].fillna(0.0) > 0
    frame["steady"] = (frame["step"] >= warmup_steps) & ~compiled
    return frame


def _column(frame: pd.DataFrame, name: str) -> np.ndarray:
    """``frame[name]`` as float64, NaN where not measured (or not a number; the column
    absent: all NaN), as ``_number`` reads each cell."""
    import numpy as np
    import pandas as pd

    if name not in frame:
        return np.full(len(frame), np.nan)
    values = pd.to_numeric(frame[name], errors="coerce")
    return np.asarray(values, dtype="float64")


def _parts_columns(frame: pd.DataFrame, device_planes: bool) -> dict[str, np.ndarray]:
    """Each row's wall time by measured part, plus ``unattributed``: per part, its seconds (NaN
    where not measured), see the module docstring. The parts take the wall time in ``PARTS``
    order, each at most what the ones before left; ``unattributed`` is what is left (NaN where
    the wall time is not known), so where it is known they add up to it."""
    import numpy as np

    wall = _column(frame, "wall_s")
    python, build = _column(frame, "python_tracing_s"), _column(frame, "graph_build_s")
    wait = _column(frame, "device_wait_s")
    busy = _column(frame, "execute_s")
    if device_planes:
        busy = np.where(np.isnan(busy), _column(frame, "device_busy_s"), busy)
    both_missing = np.isnan(python) & np.isnan(build)
    tracing = np.where(both_missing, np.nan, np.nan_to_num(python) + np.nan_to_num(build))
    device = np.where(
        np.isnan(wait) & np.isnan(busy),
        np.nan,
        np.maximum(np.nan_to_num(wait), np.nan_to_num(busy)),
    )
    measured = {
        "compile": _column(frame, "compile_s"),
        "transfer": _column(frame, "transfer_s"),
        "tracing": tracing,
        "device": device,
    }
    known = ~np.isnan(wall)
    left = wall.copy()
    parts: dict[str, np.ndarray] = {}
    for name in PARTS:
        seconds = measured[name]
        taken = np.minimum(np.maximum(seconds, 0.0), left)
        has = ~np.isnan(seconds)
        parts[name] = np.where(known, np.where(has, taken, np.nan), seconds)
        left = np.where(known & has, left - taken, left)
    parts[UNATTRIBUTED] = left  # NaN where the wall time is not known
    return parts


def _bound_columns(
    parts: dict[str, np.ndarray], wall: np.ndarray
) -> tuple[list[str | None], np.ndarray]:
    """Per row, the largest measured part (the first in ``PARTS``
    order on a tie) and its share of the wall time, capped at 1; None and NaN where no part
    was measured, the wall time is unknown or zero, or the largest part is not positive."""
    import numpy as np

    stacked = np.vstack([np.where(np.isnan(parts[n]), -1.0, parts[n]) for n in PARTS])
    any_measured = np.vstack([~np.isnan(parts[n]) for n in PARTS]).any(axis=0)
    best = stacked.argmax(axis=0)
    seconds = stacked[best, np.arange(stacked.shape[1])]
    usable = any_measured & ~np.isnan(wall) & (wall != 0) & (seconds > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(usable, np.minimum(seconds / np.where(usable, wall, 1.0), 1.0), np.nan)
    names = [PARTS[i] if ok else None for i, ok in zip(best.tolist(), usable.tolist(), strict=True)]
    return names, share


def step_story(
    timeline: pd.DataFrame, warmup_steps: int, device_planes: bool = True
) -> StepStory | None:
    """Where a steady step's time goes: the steady step of median wall time (its parts add up
    to it, where medians of each column would not), how the steady steps are bound, what
    warm-up cost, and which traced steps compiled. ``timeline`` must carry ``with_bounds``'
    columns, made with the same ``device_planes``. None without steps."""
    if timeline is None or timeline.empty or "bound" not in timeline:
        return None
    steady = timeline[timeline["steady"] & timeline["wall_s"].notna()]
    warmup = timeline[timeline["step"] < warmup_steps]
    later = timeline[(timeline["step"] >= warmup_steps) & (timeline["compile_s"].fillna(0) > 0)]
    traced = timeline[timeline["source"] == "trace"]
    story = StepStory(
        steps=len(timeline),
        warmup_steps=len(warmup),
        steady_steps=len(steady),
        warmup_compile_s=_sum(warmup["compile_s"]),
        later_compile_steps=[int(s) for s in later["step"]],
        later_compile_s=_sum(later["compile_s"]) if len(later) else None,
        traced_steps=[int(s) for s in traced["step"]],
        traced_compile_steps=[int(s) for s in traced[traced["compile_s"].fillna(0) > 0]["step"]],
    )
    if steady.empty:
        return story
    median, _ = steady_median(timeline, warmup_steps)
    row = median.to_dict()
    story.median_step = int(median["step"])
    story.median_wall_s = float(median["wall_s"])
    story.median_source = str(median["source"])
    # the parts ``with_bounds`` gave the row: the story's step is the timeline's
    parts = {
        name: _number(row.get(column))
        for name, column in zip((*PARTS, UNATTRIBUTED), PART_COLUMNS, strict=True)
    }
    story.parts = {name: parts[name] for name in PARTS}
    story.unattributed_s = parts[UNATTRIBUTED]
    story.parts[UNATTRIBUTED] = parts[UNATTRIBUTED]
    sources = PART_SOURCES.get(story.median_source, {})
    story.part_sources = {
        name: sources[name] for name in PARTS if parts[name] is not None and name in sources
    }
    story.device_busy_s = _number(row.get("device_busy_s"))
    if not device_planes and _number(row.get("execute_s")) is None:
        story.host_xla_busy_s = story.device_busy_s  # not a part: host work, not a wait
    bound = median["bound"]  # None where no part was measured (NaN once in a row)
    story.bound = bound if isinstance(bound, str) else None
    story.bound_share = _number(median["bound_share"])
    counts = steady["bound"].dropna().value_counts()
    story.bound_steps = {str(k): int(v) for k, v in counts.items()}
    return story


def worth_most(
    story: StepStory | None, findings: Sequence[Finding], answers: Mapping[str, Sequence[Kind]]
) -> Finding | None:
    """The one change worth most: the finding with the largest measured cost per step (a cost
    paid again every step outweighs one paid once), else the one with the largest measured
    cost over the run, else the finding that answers what bounds the steady step (its bound's
    kinds in ``answers``, most specific first: ``xlaprof.analyzers.story_answers``, from each
    kind's registry entry), else the most severe. ``story.worth_most_basis`` says which
    rule picked it. None without findings."""
    if not findings:
        return None
    recurring = [f for f in findings if _per_step(f.cost)]
    if recurring:
        chosen = max(recurring, key=lambda f: (_per_step(f.cost), f.severity.rank))
        _basis(story, f"the largest cost per step ({format_seconds(_per_step(chosen.cost))})")
        return chosen
    whole = [f for f in findings if f.cost is not None and _run_cost(f.cost)]
    if whole:
        chosen = max(whole, key=lambda f: (_run_cost(f.cost), f.severity.rank))
        _basis(
            story,
            f"no finding has a measured cost per step; the largest over the run "
            f"({format_seconds(_run_cost(chosen.cost))})",
        )
        return chosen
    bound = None if story is None else story.bound
    if bound is not None and bound in answers:
        for kind in answers[bound]:
            match = [f for f in findings if f.kind is kind]
            if match:
                _basis(
                    story,
                    "no finding has a measured cost; the one that answers the "
                    "largest part of the steady step",
                )
                return max(match, key=lambda f: f.severity.rank)
    _basis(story, "no finding has a measured cost; the most severe")
    return max(findings, key=lambda f: f.severity.rank)


def _per_step(cost: Cost | None) -> float:
    return 0.0 if cost is None else cost.per_step_s or 0.0


def _run_cost(cost: Cost | None) -> float:
    if cost is None:
        return 0.0
    return cost.run_s or cost.one_time_s or 0.0


def _basis(story: StepStory | None, text: str) -> None:
    if story is not None:
        story.worth_most_basis = text


def finding_costs(
    findings: Sequence[Finding],
    rows: Sequence[StepRow],
    timeline: pd.DataFrame | None,
    warmup_steps: int,
) -> None:
    """Give each finding that has none the cost the run measured for it (``Cost``):

    - ``recompilation``: the compile time of the steps after warm-up it compiled in
      (``evidence["compile_steps"]``): paid once per new graph; per step as well where it
      compiled in more than half the steps after warm-up (it recurs).
    - ``host_sync``: the time the steps with device-to-host reads spent in them
      (``TransferFromDeviceTime``: a read waits for the device to finish the graph, then
      copies), per step (median over the steady steps with reads) and over the run; every read
      of the step is in it, whichever site made it.

    Other kinds keep what their analyzer set (``tracing_bound`` sets its own), else none.
    """
    import statistics

    by_step = {row.step: row for row in rows}
    # the step model's compile part, as the story's "compiled again" line says it (the run's
    # CompileTime; in a traced step, its compile spans)
    compile_s: dict[int, float] = {}
    if timeline is not None and not timeline.empty:
        compile_s = {
            int(s): float(c)
            for s, c in zip(timeline["step"], timeline["compile_s"], strict=True)
            if c == c
        }
    after = [s for s in by_step if s >= warmup_steps]
    for finding in findings:
        if finding.cost is not None:
            continue
        if finding.kind is Kind.RECOMPILATION:
            steps = [
                int(s)
                for s in finding.evidence.get("compile_steps") or []
                if int(s) >= warmup_steps
            ]
            paid = [compile_s[s] for s in steps if s in compile_s]
            if not paid:
                continue
            total = sum(paid)
            recurs = len(after) > 0 and len(steps) > len(after) / 2
            finding.cost = Cost(
                per_step_s=total / len(after) if recurs else None,
                one_time_s=None if recurs else total,
                run_s=total,
                steps=len(paid),
                basis="compile time (CompileTime; in a traced step its compile spans) of the "
                "steps after warm-up it compiled in",
            )
        elif finding.kind is Kind.HOST_SYNC:
            reading = [r for r in rows if r.transfers_from_device > 0]
            if not reading:
                continue
            steady = [
                r.from_device_s for r in reading if r.step >= warmup_steps and r.compiles == 0
            ]
            finding.cost = Cost(
                per_step_s=statistics.median(steady) if steady else None,
                run_s=sum(r.from_device_s for r in reading),
                steps=len(reading),
                basis=(
                    "time in device-to-host reads (TransferFromDeviceTime: a read waits for "
                    "the device to finish the graph, then copies), all reads of the step"
                ),
            )


def _number(value: object) -> float | None:
    if value is None:
        return None
    try:
        number = as_float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else number


def _sum(values: pd.Series) -> float | None:
    known = values.dropna()
    return float(known.sum()) if len(known) else None
