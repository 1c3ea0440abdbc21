"""The run's one step model: each step's time in the run split into the parts that were
measured, what bounds the step, and where a steady step's time goes.

Every per-step verdict xlaprof shows comes from here, so the step timeline, the story a report
opens with, "worth most" and the step chart cannot disagree. A step's time is what it cost the
run (``tables.timeline``: the host runs ahead of an asynchronous device, so it is not when the
step's sync returned). Its parts, each measured, each from a named source (``PART_SOURCES``):

- ``compile``: compiling (the ``CompileTime`` metric; in a trace, ``XLAGraphExecutor::Compile``,
  or where no lazy-tensor runtime runs, the PJRT client's compile);
- ``tracing``: host work: the stepping thread's CPU time, its Python, lazy tracing and graph
  build at the sync (a run's CPU clock; a capture alone measures only its spans: the graph
  build, ``SyncTensorsGraphInternal`` less the barrier it waits in);
- ``transfer``: host-device copies (``TransferToDeviceTime``/``TransferFromDeviceTime``; in a
  trace, the transfer spans: a read waits for the device to finish the graph first);
- ``device``: device work: the device's own busy time running the step's executions, whenever
  they ran (a run's executions; a capture alone: the busiest device's busy time in the step,
  the CPU client's executions where there is no device plane);
- ``cpu_wait``: the stepping thread ready to run but waiting for a CPU (Linux's run-queue
  wait, read at each boundary): a busy machine's share of the host's side, no cause in the
  user's code (a run only; a trace does not record it);
- ``unattributed``: the rest of the step's time: measured as a duration, but not what it was
  spent on (blocked on I/O, on another thread, preempted, untraced Python). Shown as such,
  never named as a cause.

Waiting for the device (a barrier, ``WaitDeviceOps``, a sync blocked behind a full queue) is
never host work: it is time the device's part already holds.

Host and device work overlap: the device runs one step's graph while the host traces the next.
So the parts take the step's time bound side first: after compiling, the larger of device work
and the host's side (``tracing`` and ``cpu_wait``) takes what it measured, then the other side
and the transfers take what is left (each at most that); ``overlap_s`` is the measured work
that found no time left, the work that ran hidden under the other side's. The parts always
add up to the step's time.

A step's ``bound`` is its largest part (so the largest part and the bound cannot disagree) and
``bound_share`` that part's share of the step's time: a description of the step, not a
finding. In steady state it reads: ``device`` (device-bound: the healthy case), ``tracing``
(tracing-bound: host work per step exceeds device work), ``transfer`` (sync-bound: the step
waits on device-to-host reads and host-device copies), ``compile``. Whether it is worth a fix
is the analyzers' call, with their own thresholds; the story names the finding worth most (by
cost). A step is steady when it comes after warm-up and compiled nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from xlaprof.findings import Cost, Finding, Kind
from xlaprof.model.result import UNATTRIBUTED, StepStory
from xlaprof.model.warmup import first_steady_of
from xlaprof.parse.units import as_float, format_seconds
from xlaprof.tables.timeline import steady_median

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


# The measured parts of a step, in the order they take its wall time (module docstring).
PARTS = ("compile", "transfer", "tracing", "device", "cpu_wait")
# Where each part of a step comes from, by the row's ``source`` (the timeline's).
PART_SOURCES = {
    "metrics": {
        "compile": "metrics (CompileTime)",
        "transfer": "metrics (TransferToDeviceTime, TransferFromDeviceTime)",
        "tracing": "metrics (the stepping thread's CPU clock)",
        "device": "the run's executions (each one's launch and completion, from ExecuteTime's "
        "samples: the device's own busy time, queue left out)",
        "cpu_wait": "the stepping thread's run-queue wait (Linux's /proc schedstat)",
    },
    "trace": {
        "compile": "trace (XLAGraphExecutor::Compile; without torch_xla: the PJRT client's "
        "compile, PJRT_Client_Compile; without either: the host table's compile spans, "
        "dynamo's and inductor's)",
        "transfer": "trace (transfer spans)",
        "tracing": "metrics (the stepping thread's CPU clock; a capture alone: trace, the "
        "graph build less its barrier wait)",
        "device": "the run's executions (a capture alone: the busiest device's busy time in "
        "the step; without a device plane, the CPU client's executions)",
        "cpu_wait": "the run's steps (the stepping thread's run-queue wait)",
    },
}
STORY_COLUMNS = ("bound", "bound_share", "steady", "overlap_s")
# The step model's columns the timeline gets (``with_bounds``): each part's seconds.
PART_COLUMNS = tuple(f"part_{name}_s" for name in (*PARTS, UNATTRIBUTED))


def with_bounds(
    timeline: pd.DataFrame, warmup_steps: int, device_planes: bool = True
) -> pd.DataFrame:
    """``timeline`` with the step model: each part's seconds (``PART_COLUMNS``), ``bound``,
    ``bound_share`` (from measured parts only), ``overlap_s`` (measured work hidden under the
    other side's) and ``steady`` (after warm-up, compiling nothing). ``device_planes`` is kept
    for callers' wording only: without a device plane the device is the CPU client, whose
    executions are the device work all the same."""
    del device_planes
    frame = timeline.copy()
    parts, overlap = _parts_columns(frame)
    for name, column in zip((*PARTS, UNATTRIBUTED), PART_COLUMNS, strict=True):
        frame[column] = parts[name]
    frame["overlap_s"] = overlap
    bounds, shares = _bound_columns(parts, _column(frame, "wall_s"), parts[UNATTRIBUTED])
    frame["bound"] = bounds
    # a list with None where not measured, so the column's type is inferred as before
    frame["bound_share"] = [None if share != share else share for share in shares.tolist()]
    compiled = frame["compile_s"].fillna(0.0) > 0
    first = first_steady_of(frame, warmup_steps, "compile_s")
    frame["steady"] = (frame["step"] >= first) & ~compiled
    return frame


def with_step_bounds(tracing: pd.DataFrame, timeline: pd.DataFrame) -> pd.DataFrame:
    """``tracing`` (the host-vs-device table, ``tables.device.tracing_vs_device``, of the one
    host ``timeline`` is of) with each step the timeline holds taking the timeline's ``bound``
    (``with_bounds``: the step's largest measured part, None where it has none), so the table,
    the step timeline and the story give a step one verdict; ``tracing_bound`` is that bound
    being "tracing" on a lazy-tensor host (None where there is no bound, as on other hosts).
    The table's steps the timeline does not hold keep theirs. A run's trace window: its own
    host figure (the runtime's spans) leaves out the host's Python, which the run's CPU clock
    measures, so it alone cannot say whether host work took the step."""
    import pandas as pd

    if tracing.empty or timeline.empty or "bound" not in timeline:
        return tracing
    of_step = {
        int(step): None if pd.isna(bound) else str(bound)
        for step, bound in zip(timeline["step"], timeline["bound"], strict=True)
    }
    steps = [int(step) for step in tracing["step"]]
    held = [step in of_step for step in steps]
    bounds = [
        of_step[step] if here else (None if pd.isna(own) else own)
        for step, here, own in zip(steps, held, tracing["bound"], strict=True)
    ]
    verdicts = [
        (None if bound is None else bound == "tracing") if here and bool(lazy) else own
        for bound, here, lazy, own in zip(
            bounds, held, tracing["lazy_tensor"], tracing["tracing_bound"], strict=True
        )
    ]
    tracing = tracing.copy(deep=False)  # columns replaced, none written in place
    tracing["bound"] = pd.Series(bounds, index=tracing.index, dtype=object)
    tracing["tracing_bound"] = pd.Series(verdicts, index=tracing.index, dtype=object)
    return tracing


def _column(frame: pd.DataFrame, name: str) -> np.ndarray:
    """``frame[name]`` as float64, NaN where not measured (or not a number; the column
    absent: all NaN), as ``_number`` reads each cell."""
    import numpy as np
    import pandas as pd

    if name not in frame:
        return np.full(len(frame), np.nan)
    values = pd.to_numeric(frame[name], errors="coerce")
    return np.asarray(values, dtype="float64")


# The order the parts take a step's time, after compiling: the bound side first (module
# docstring).
_DEVICE_FIRST = ("device", "tracing", "cpu_wait", "transfer")
_HOST_FIRST = ("tracing", "cpu_wait", "transfer", "device")


def _parts_columns(frame: pd.DataFrame) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Each row's time by measured part, plus ``unattributed``, and the overlap (module
    docstring): per part, its seconds (NaN where not measured). Compiling takes the time first,
    then the larger of device work and the host's side, then the rest, each at most what the
    ones before left; ``unattributed`` is what is left (NaN where the step's time is not
    known), so where it is known they add up to it. The overlap is the measured work (host,
    transfers, device) beyond what it took."""
    import numpy as np

    wall = _column(frame, "wall_s")
    python, build = _column(frame, "python_tracing_s"), _column(frame, "graph_build_s")
    both_missing = np.isnan(python) & np.isnan(build)
    tracing = np.where(both_missing, np.nan, np.nan_to_num(python) + np.nan_to_num(build))
    measured = {
        "compile": _column(frame, "compile_s"),
        "transfer": _column(frame, "transfer_s"),
        "tracing": tracing,
        "device": _column(frame, "device_busy_s"),
        "cpu_wait": _column(frame, "cpu_wait_s"),
    }
    host_side = np.nan_to_num(tracing) + np.nan_to_num(measured["cpu_wait"])
    device_first = np.nan_to_num(measured["device"], nan=-1.0) >= host_side
    known = ~np.isnan(wall)
    left = wall.copy()
    parts: dict[str, np.ndarray] = {}

    def take(name: str, rows: np.ndarray) -> None:
        seconds = measured[name]
        taken = np.minimum(np.maximum(seconds, 0.0), left)
        has = ~np.isnan(seconds) & rows
        value = np.where(known, np.where(~np.isnan(seconds), taken, np.nan), seconds)
        parts[name] = np.where(rows, value, parts.get(name, value))
        left[:] = np.where(known & has, left - taken, left)

    take("compile", np.ones(len(wall), dtype=bool))
    # each row takes the others in its own order: device rows by _DEVICE_FIRST, host rows by
    # _HOST_FIRST (a part's second call sets the other rows, keeping the first call's)
    for device_part, host_part in zip(_DEVICE_FIRST, _HOST_FIRST, strict=True):
        take(device_part, device_first)
        take(host_part, ~device_first)
    parts[UNATTRIBUTED] = left  # NaN where the step's time is not known
    # host and device work only: a transfer's time is mostly a wait for the device (a read
    # waits for the graph to finish), which is no work running hidden under the device's
    work = sum(np.nan_to_num(np.maximum(measured[n], 0.0)) for n in ("tracing", "device"))
    took = sum(np.nan_to_num(parts[n]) for n in ("tracing", "device"))
    overlap = np.where(known, np.maximum(work - took, 0.0), np.nan)
    return parts, overlap


def _bound_columns(
    parts: dict[str, np.ndarray], wall: np.ndarray, unattributed: np.ndarray
) -> tuple[list[str | None], np.ndarray]:
    """Per row, the largest measured part (the first in ``PARTS``
    order on a tie) and its share of the wall time, capped at 1; None and NaN where no part
    was measured, the wall time is unknown or zero, or the largest part is not positive; and
    None where it is device work smaller than the ``unattributed`` rest: a device idle for
    more of the step than it worked does not bound it (a capture's GPU busy 3% of a step whose
    host side is not measured is not device-bound; its device model says where the rest went).
    A host part keeps its bound: the unmeasured rest may be more of the same host work."""
    import numpy as np

    stacked = np.vstack([np.where(np.isnan(parts[n]), -1.0, parts[n]) for n in PARTS])
    any_measured = np.vstack([~np.isnan(parts[n]) for n in PARTS]).any(axis=0)
    best = stacked.argmax(axis=0)
    seconds = stacked[best, np.arange(stacked.shape[1])]
    usable = any_measured & ~np.isnan(wall) & (wall != 0) & (seconds > 0)
    usable &= ~((best == PARTS.index("device")) & (np.nan_to_num(unattributed) > seconds))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(usable, np.minimum(seconds / np.where(usable, wall, 1.0), 1.0), np.nan)
    names = [PARTS[i] if ok else None for i, ok in zip(best.tolist(), usable.tolist(), strict=True)]
    return names, share


def step_story(
    timeline: pd.DataFrame,
    warmup_steps: int,
    device_planes: bool = True,
    drain_s: float | None = None,
    lost: int | None = None,
) -> StepStory | None:
    """Where a steady step's time goes: the steady step of median time (its parts add up to
    it, where medians of each column would not), how the steady steps are bound, how far the
    host ran ahead of the device, what warm-up cost, and which traced steps compiled.
    ``timeline`` must carry ``with_bounds``' columns; ``drain_s``: the run's final drain (the
    device finishing what the host had queued, ``rundir.executions``) and ``lost`` (how many
    executions' samples were dropped: ``RunDevice.lost``), both None where the run recorded
    no executions. None without steps."""
    del device_planes
    if timeline is None or timeline.empty or "bound" not in timeline:
        return None
    timed = timeline["wall_s"].notna()
    steady = timeline[timeline["steady"] & timed]
    first = first_steady_of(timeline, warmup_steps, "compile_s")
    warmup = timeline[timeline["step"] < first]
    later = timeline[(timeline["step"] >= first) & (timeline["compile_s"].fillna(0) > 0)]
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
        lost_executions=lost,
    )
    if lost is not None:  # the run timed its steps as the device ran them: say which it could not
        story.untimed_steps = int((timeline["steady"] & ~timed).sum())
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
    story.host_wall_s = _number(row.get("host_wall_s"))
    story.host_cpu_s = _host_cpu(row)
    if story.host_cpu_s is not None:
        # a run's thread CPU clock; a capture alone measures only the thread's spans
        measured = _number(row.get("python_tracing_s")) is not None
        story.host_measure = "cpu" if measured or story.median_source == "metrics" else "spans"
    story.host_blocked_s = _number(row.get("device_wait_s"))
    story.host_cpu_wait_s = _number(row.get("cpu_wait_s"))
    story.transfer_s = _number(row.get("transfer_s"))
    story.overlap_s = _number(row.get("overlap_s"))
    story.queue_s = _number(row.get("queue_s"))
    _run_ahead(story, timeline, steady)
    story.drain_s = drain_s
    bound = median["bound"]  # None where no part was measured (NaN once in a row)
    story.bound = bound if isinstance(bound, str) else None
    story.bound_share = _number(median["bound_share"])
    counts = steady["bound"].dropna().value_counts()
    story.bound_steps = {str(k): int(v) for k, v in counts.items()}
    return story


def _host_cpu(row: Mapping[Any, object]) -> float | None:
    """The stepping thread's work in a step: Python + tracing and the graph build (None where
    neither was measured)."""
    python, build = _number(row.get("python_tracing_s")), _number(row.get("graph_build_s"))
    if python is None and build is None:
        return None
    return (python or 0.0) + (build or 0.0)


def _run_ahead(story: StepStory, timeline: pd.DataFrame, steady: pd.DataFrame) -> None:
    """How far the host ran ahead of the device: the most steps, and the median over the
    steady steps (where the run measured it)."""
    if "ahead_steps" not in timeline:
        return
    every = timeline["ahead_steps"].dropna()
    if len(every):
        story.ahead_max = int(every.max())
    known = steady["ahead_steps"].dropna()
    if len(known):
        story.ahead_median = float(known.median())


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
