"""Steps as the device runs them: each graph execution attributed to the step that launched it.

torch_xla's ``sync()`` builds the step's graph, hands it to the runtime and returns; the device
runs it later. On a device-bound loop the host runs ahead (torch_xla's CPU client lets about 32
executions wait before a launch blocks), so a step's sync returns long before its graph has
run, and the host's boundary-to-boundary time says nothing of what the step cost. A run
directory records every execution's launch and completion (``executions.jsonl``, from
``ExecuteTime``'s samples: the value is launch to completion, queue included). From them:

- **Attribution.** Executions are launched in program order. Each belongs to the step whose
  window (its start to the next step's start) holds its launch, except that a step's sync
  launches its graph from torch_xla's thread pool a moment after the sync returned, which can
  fall in a later step's window: a launch goes back to the earliest earlier step that still
  has graphs not yet launched (``StepRow.graphs``: each graph a step builds runs once; where
  the run has fewer launches than graphs, to the previous step only). A
  launch before the first step, or after the last step has launched all its graphs, belongs to
  no step.
- **Lost samples.** torch_xla keeps a window of recent samples; executions that completed
  with theirs gone before a read are recorded as a count and the execution they completed
  before. They keep their places in the order (so later launches are still counted to the
  right steps); their steps, and the step of the execution right after them (whose start on
  the device is the unknown completion of the last lost one), are not measured.
- **The device's own busy time** of an execution is its completion less the later of its launch
  and the previous completion (the device runs one execution at a time); the rest of launch to
  completion is its wait in the queue.
- **A step's time** is what it costs the run: the step ends when both its host work and its
  device work have ended (``end = max(host end, last completion)``), and it begins when the
  previous step ended or when its host work began, whichever is later, so the steps' times add
  up to the run's, the final drain included, while time xlaprof spent between steps with the
  device idle is in no step. In steady state that is the larger of the step's host and device
  work.
- **Run-ahead.** When a step's first execution was launched, how many earlier steps had
  executions not yet complete: how far the host was ahead of the device. A step whose
  samples were all lost still counts among the earlier steps, complete no sooner than the step
  before it: where samples were lost the count is a lower bound.

Pure: rows in, a table out.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from xlaprof.rundir.schema import ExecutionRow, StepRow

# The columns ``step_executions`` gives each step (seconds; times are offsets from the first
# step's start): its time in the run, when its executions launched and completed, the
# device's own busy time and the queue wait of its executions, how many, and the run-ahead.
COLUMNS = (
    "step",
    "time_s",
    "launch_s",
    "completion_s",
    "device_s",
    "queue_s",
    "executions",
    "ahead_steps",
)


@dataclass
class StepDevice:
    """One step as the device ran it (``COLUMNS``); None where not measured."""

    step: int
    time_s: float | None = None
    # the step's place in the run (offsets): it began when the previous step ended or when its
    # own host work began, whichever is later, and ended when its host and device work had
    start_s: float | None = None
    end_s: float | None = None
    # when the device began its first execution of the step (after the queue), an offset
    begin_s: float | None = None
    launch_s: float | None = None
    completion_s: float | None = None
    device_s: float | None = None
    queue_s: float | None = None
    executions: int = 0
    ahead_steps: int | None = None


@dataclass
class RunDevice:
    """The run's executions, attributed: one ``StepDevice`` per step row (in row order) and
    what no step holds.

    ``lost``: executions whose times torch_xla's window of samples dropped before they were
    read (the steps that launched them have fewer executions than graphs, and the step of the
    execution that completed right after them does not know when its own began: their device
    time and time in the run are not measured); ``outside``: executions launched
    before the first step or after the last one (a read after the loop); ``drain_s``: from the
    last step's host end to its last completion (the device finishing what the host had
    queued); ``max_ahead``: the most steps the host was ahead of the device.
    """

    steps: list[StepDevice] = field(default_factory=list)
    origin: float = 0.0  # the first step's start (Unix seconds): what the offsets count from
    lost: int = 0
    outside: int = 0
    drain_s: float | None = None
    max_ahead: int | None = None
    median_ahead: float | None = None
    # each execution's own busy time (seconds), the steps' executions only, in launch order
    execution_busy: list[float] = field(default_factory=list)


def device_windows(device: RunDevice) -> list[tuple[int, int, int]]:
    """Each step's place in the run: (step, start, end) in Unix nanoseconds, its time in the
    run (``StepDevice.start_s``/``end_s``): where a trace's device events for the step lie, and
    the device's idle time in it is the step's, as the timeline counts it."""
    out = []
    for step in device.steps:
        if step.start_s is None or step.end_s is None:
            continue
        start = round((device.origin + step.start_s) * 1e9)
        out.append((step.step, start, round((device.origin + step.end_s) * 1e9)))
    return out


def host_windows(rows: Sequence[StepRow]) -> list[tuple[int, int, int]]:
    """Each step's host wall as its row measured it: (step, start, end) in Unix nanoseconds,
    ``start`` + ``wall_s`` (the length rounded on its own, so it is ``wall_s`` to the
    nanosecond); rows without both left out. Where a trace's host figures for the step are read:
    the session's bookkeeping at the boundary (after the row's clock stops, inside the trace's
    ``xlaprof_step`` span) is no part of the step's wall."""
    out = []
    for row in rows:
        if row.start is None or row.wall_s is None:
            continue
        if not (math.isfinite(row.start) and math.isfinite(row.wall_s)):
            continue
        start = round(row.start * 1e9)
        out.append((row.step, start, start + round(max(row.wall_s, 0.0) * 1e9)))
    return out


def _windows(rows: Sequence[StepRow]) -> tuple[list[float], list[float]] | None:
    """Each step's host start and host end (Unix seconds), or None where a row lacks them."""
    starts: list[float] = []
    ends: list[float] = []
    for row in rows:
        if row.start is None or row.wall_s is None:
            return None
        if not (math.isfinite(row.start) and math.isfinite(row.wall_s)):
            return None
        starts.append(row.start)
        ends.append(row.start + max(row.wall_s, 0.0))
    return starts, ends


def attribute(
    rows: Sequence[StepRow], executions: Sequence[ExecutionRow] | None
) -> RunDevice | None:
    """Each execution's step, and each step's device figures (module docstring). None where
    the run recorded no executions (an older xlaprof) or its rows lack their times."""
    if executions is None or not rows:
        return None
    windows = _windows(rows)
    if windows is None:
        return None
    starts, ends = windows
    timed = _placed(executions)
    result = RunDevice(
        steps=[StepDevice(step=row.step) for row in rows],
        origin=starts[0],
        lost=sum(e.missed for e in executions),
    )
    owner = _owners(rows, starts, ends, [launch for launch, _ in timed])
    # lost ones are counted in ``lost`` only, wherever they were placed
    result.outside = sum(
        1 for o, (_, end) in zip(owner, timed, strict=True) if o is None and end is not None
    )
    unknown = _busy(result, timed, owner)
    unfinished = [
        (row.graphs is not None and step.executions < row.graphs) or index in unknown
        for index, (row, step) in enumerate(zip(rows, result.steps, strict=True))
    ]
    for step, open_ in zip(result.steps, unfinished, strict=True):
        if open_:  # a graph not seen completing, or its device start not known: not measured
            step.device_s = step.queue_s = None
        elif step.executions == 0:  # ran nothing on the device
            step.device_s, step.queue_s = 0.0, 0.0
    _times(result, starts, ends, unfinished)
    _ahead(result, unfinished)
    return result


def _placed(executions: Sequence[ExecutionRow]) -> list[tuple[float, float | None]]:
    """The executions as (launch, completion) in launch order, with each lost one (a ``missed``
    row that says which execution it completed ``before``) in its place as (that execution's
    launch, None): executions complete in launch order, so the lost ones launched before it and
    hold their places in the order the attribution counts. Lost ones not placed are left out
    (only counted in ``RunDevice.lost``)."""
    timed = sorted(
        (e.launch, e.completion)
        for e in executions
        if e.launch is not None and e.completion is not None
    )
    position: dict[float, int] = {}
    for index, (_, completion) in enumerate(timed):
        position.setdefault(completion, index)
    lost = [0] * len(timed)
    for e in executions:
        if e.missed > 0 and e.before is not None and e.before in position:
            lost[position[e.before]] += e.missed
    if not any(lost):
        return list(timed)
    placed: list[tuple[float, float | None]] = []
    for (launch, completion), count in zip(timed, lost, strict=True):
        placed.extend([(launch, None)] * count)
        placed.append((launch, completion))
    return placed


def _owners(
    rows: Sequence[StepRow], starts: list[float], ends: list[float], launches: list[float]
) -> list[int | None]:
    """The index of the step each launch (sorted) belongs to, or None (module docstring)."""
    # graphs each step built and has not yet seen launched; None: not recorded (time alone)
    left: list[int | None] = [row.graphs for row in rows]
    owner: list[int | None] = []
    # Every graph a step built launches once, in order, so where the counts hold (as many
    # launches as graphs) a late launch goes back to the earliest step still owed one; where
    # they do not (a graph launched by a path the run does not time), only to the previous
    # step, so one missing launch cannot pull every later one into its step.
    counted = all(g is not None for g in left) and len(launches) >= sum(g or 0 for g in left)
    earliest = 0  # no step before this one has a recorded graph not yet launched
    for launch in launches:
        index = bisect.bisect_right(starts, launch) - 1
        if index < 0:
            owner.append(None)
            continue
        if not counted:
            earliest = max(index - 1, 0)
        while earliest < index and not left[earliest]:
            earliest += 1
        if earliest < index and left[earliest]:
            # an earlier step's sync launched it after later steps began (its launch comes
            # from the runtime's thread pool, which waits for a CPU on a busy machine)
            index = earliest
        remaining = left[index]
        if index == len(rows) - 1 and remaining == 0 and launch > ends[index]:
            owner.append(None)  # after the last step, which launched all its graphs
            continue
        if remaining:
            left[index] = remaining - 1
        owner.append(index)
    return owner


def _busy(
    result: RunDevice, timed: list[tuple[float, float | None]], owner: list[int | None]
) -> set[int]:
    """Each step's executions, device busy and queue seconds, and its launch and completion;
    the steps whose device time is not known (returned): an execution that completed right
    after lost ones began when the last of them completed, which is not known. A lost execution
    (no completion) counts for no step here, so its step has fewer executions than graphs.
    Steps with no execution are given none here (``attribute`` says what they ran)."""
    previous = -math.inf  # the latest completion so far, in completion order
    # (completion, launch, index) of the executions whose times were read, by completion
    known = sorted((end, start, i) for i, (start, end) in enumerate(timed) if end is not None)
    busy: list[float | None] = [None] * len(timed)
    queue = [0.0] * len(timed)
    for end, start, i in known:
        begin = max(start, previous)
        if i == 0 or timed[i - 1][1] is not None:  # not right after lost ones
            busy[i] = max(end - begin, 0.0)
        queue[i] = max(begin - start, 0.0)
        previous = max(previous, end)
    unknown: set[int] = set()
    for i, index in enumerate(owner):
        launch, completion = timed[i]
        if index is None or completion is None:
            continue
        step = result.steps[index]
        step.executions += 1
        spent = busy[i]
        if spent is None:
            unknown.add(index)
        else:
            result.execution_busy.append(spent)
            step.device_s = (step.device_s or 0.0) + spent
        step.queue_s = (step.queue_s or 0.0) + queue[i]
        step.launch_s = launch if step.launch_s is None else min(step.launch_s, launch)
        if spent is not None:  # where it began on the device is known
            begin = launch + queue[i]
            step.begin_s = begin if step.begin_s is None else min(step.begin_s, begin)
        step.completion_s = (
            completion if step.completion_s is None else max(step.completion_s, completion)
        )
    return unknown


def _times(
    result: RunDevice, starts: list[float], ends: list[float], unfinished: list[bool]
) -> None:
    """Each step's time in the run (module docstring), and the drain; launch and completion
    made offsets from the first step's start. A step with a graph never seen completing
    (``unfinished``: the run ended without a drain, or its execution's sample was lost) has no
    time (its end is unknown)."""
    origin = starts[0]
    ended = origin
    for index, step in enumerate(result.steps):
        end = ends[index]
        if step.completion_s is not None:
            end = max(end, step.completion_s)
        begin = max(ended, starts[index])
        if not unfinished[index]:
            step.time_s = max(end - begin, 0.0)
            step.start_s, step.end_s = begin - origin, max(end, begin) - origin
        ended = max(ended, end)
        if step.launch_s is not None:
            step.launch_s -= origin
        if step.begin_s is not None:
            step.begin_s -= origin
        if step.completion_s is not None:
            step.completion_s -= origin
    last = result.steps[-1]
    if not unfinished[-1] and last.completion_s is not None:
        result.drain_s = max(last.completion_s + origin - ends[-1], 0.0)


def _ahead(result: RunDevice, unfinished: list[bool]) -> None:
    """Per step, how many earlier steps had executions still to complete when its first
    execution launched: completions come in launch order, so those steps are the last ones
    before it whose completion (a running maximum) is after the launch.

    A step whose every execution's sample was lost (``unfinished``, and none seen) still held
    its place in the queue: it counts among the earlier steps, as complete once the step
    before it had completed (the earliest its own completion can be). Where samples were lost
    the counts are the fewest the timeline allows: a lower bound."""
    import statistics

    latest = -math.inf  # the latest completion so far
    reach: list[float] = []  # per earlier step that ran, ``latest`` once it had completed
    ahead: list[int] = []
    for step, lost in zip(result.steps, unfinished, strict=True):
        if step.launch_s is None or step.completion_s is None:
            if lost and step.executions == 0:  # it ran, but when it completed is not known
                reach.append(latest)
            continue
        count = len(reach) - bisect.bisect_right(reach, step.launch_s)
        step.ahead_steps = count
        ahead.append(count)
        latest = max(latest, step.completion_s)
        reach.append(latest)
    if ahead:
        result.max_ahead = max(ahead)
        result.median_ahead = float(statistics.median(ahead))
