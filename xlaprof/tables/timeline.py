"""The step timeline: what each step cost the run, and where its time went, host and device.

torch_xla's ``sync()`` launches the step's graph and returns; the device runs it later, and a
device-bound host runs steps ahead. So a step's time is not when its sync returned: it is what
the step costs the run (``rundir.executions``): from when the previous step ended (or its own
host work began) until both its host work and its device work had ended. Every column is
seconds; None (NaN) where not measured:

- ``wall_s``: that time, the step's time in the run (the final drain is in the last step);
  ``host_wall_s``: the host's time from the previous boundary to this one (when its sync
  returned), which is what the step's time would be if the device never ran behind.
- host: ``python_tracing_s`` (user Python and lazy tracing: the stepping thread's CPU time
  outside the sync), ``graph_build_s`` (its CPU time inside the sync: collecting, hashing and
  handing over the graph), ``tracing_s`` (the LazyTracing metric: the part of Python time spent
  building IR), ``compile_s``, ``transfer_s`` (host-device copies; a read waits for the device
  first), ``device_wait_s`` (the host blocked on the device: the sync's wall time beyond its
  CPU time and its wait for a CPU, e.g. behind a full queue of executions, at least that where
  the sync's share of the step's wait was not recorded; in a trace, its wait spans),
  ``cpu_wait_s`` (the stepping thread ready to run but waiting for a CPU: a busy machine;
  Linux's run-queue wait, ``capture.runqueue``; a trace does not record it);
- device: ``device_busy_s`` (the device's own busy time running the step's executions, whenever
  they ran), ``device_idle_s`` (the rest of the step's time), ``queue_s`` (how long the step's
  executions waited in the queue behind earlier ones), ``ahead_steps`` (how many earlier steps'
  executions were still to complete when this step's first one launched: how far the host ran
  ahead);
- ``source``: ``metrics`` (the run's per-step rows and executions) or ``trace`` (a step a
  trace window or capture holds: its host spans from the trace, its device figures from the
  run's executions where it has them).

From metrics the host split is the stepping thread's CPU clock, read at each boundary and as
each sync is entered, so time the host spent blocked (on the device, on I/O) is in neither
part. In a step that compiled, that CPU time mixes tracing with compiling (XLA compiles on
other threads too): there neither is measured. Where no sync ended the step (``xlaprof.step``
marks) the whole step's CPU time is ``python_tracing_s`` and ``graph_build_s`` is not measured.

A run recorded by an older xlaprof has no executions: its steps' device time is not measured
(``ExecuteTime`` holds the queue, and summed it overstates device time many times over when the
host runs ahead), and their time is the host's.

From a capture alone (no run directory), a step's time is the host's boundary to boundary (in a
live job's steady state the host is either blocked behind the device or the device waits on it,
so the two agree), its device busy the device model's (the busiest device's compute in the
step; without a device plane, the CPU client's executions), and its host parts the trace's
spans. Without lazy-tensor runtime events (JAX, PyTorch eager) there is no lazy tracing to split
off: ``python_tracing_s``, ``graph_build_s``, ``transfer_s``, ``device_wait_s`` and
``tracing_s`` are not measured; ``compile_s`` is measured where the host records PJRT C API
calls (JAX: ``PJRT_Client_Compile`` inside ``backend_compile_and_load``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from xlaprof.model.warmup import first_steady_of
from xlaprof.parse.events import MODULES_LINE
from xlaprof.rundir.executions import RunDevice, StepDevice
from xlaprof.rundir.schema import StepRow
from xlaprof.tables import categorical as cols
from xlaprof.tables.intervals import Coverage

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from xlaprof.model.result import SteadyStep
    from xlaprof.model.trace import Trace

COLUMNS = [
    "step",
    "wall_s",
    "host_wall_s",
    "python_tracing_s",
    "tracing_s",
    "graph_build_s",
    "compile_s",
    "transfer_s",
    "device_wait_s",
    "cpu_wait_s",
    "device_busy_s",
    "device_idle_s",
    "queue_s",
    "ahead_steps",
    "source",
]
# The events' columns the timeline reads (``step_timeline``, ``device_busy_by_step``): what a
# pod's first host is read with (``Trace.step_view``).
EVENT_COLUMNS = ("host", "plane_kind", "line", "name", "start_ns", "end_ns", "step", "step_num")
# Host events on the main (python) line, by category, highest precedence first: a transfer
# inside a compile counts once, as compile.
_COMPILE = ("XLAGraphExecutor::Compile",)
_TRANSFER = ("TransferToDevice", "TransferFromDevice")
# the host blocked on the device: an explicit wait, and the sync's barrier (it waits for the
# previous execution's launch, which blocks behind a full queue of executions)
_WAIT = ("WaitDeviceOps", "TensorCollectionBarrier")
_GRAPH = ("SyncTensorsGraphInternal",)
_CPU_EXECUTE = "ThunkExecutor::Execute"
# Without a lazy-tensor runtime: the PJRT C API's calls, which any PJRT client (JAX, plugins)
# records; JAX's span around a compile holds the PJRT call.
_PJRT_COMPILE = ("PJRT_Client_Compile", "backend_compile_and_load", "backend_compile")
_PJRT_EXECUTE = ("PJRT_LoadedExecutable_Execute",)


def compile_spans(events: pd.DataFrame) -> int:
    """How many compiles the host's compile spans in ``events`` time: the spans the timeline's
    ``compile_s`` is read from (torch_xla's ``XLAGraphExecutor::Compile``, the PJRT C API's and
    JAX's compile calls), on any line and in or out of a step, a span inside another of its
    line (JAX's around PJRT's) not counted again; 0 where no events are held (a pod's stay in
    its hosts' caches)."""
    if events.empty:
        return 0
    names = events["name"]
    found = cols.contains(names, "|".join(_COMPILE)) | cols.member(names, _PJRT_COMPILE)
    spans = events[found & cols.equals(events["plane_kind"], "host")]
    count = 0
    for _, line in spans.groupby(spans["line"].astype(str), sort=False):
        reach = None
        for start, end in sorted(zip(line["start_ns"], line["end_ns"], strict=True)):
            if reach is None or start >= reach:
                count += 1
            reach = end if reach is None else max(reach, end)
    return count


def _covered_ns(frame: pd.DataFrame) -> int:
    """The length of the union of ``frame``'s event intervals."""
    return Coverage.of(frame["start_ns"].to_numpy(), frame["end_ns"].to_numpy()).total


class TimelineRow(TypedDict):
    """One step of the timeline (``COLUMNS``): seconds, None where not measured."""

    step: int
    wall_s: float | None
    host_wall_s: float | None
    python_tracing_s: float | None
    tracing_s: float | None
    graph_build_s: float | None
    compile_s: float | None
    transfer_s: float | None
    device_wait_s: float | None
    cpu_wait_s: float | None
    device_busy_s: float | None
    device_idle_s: float | None
    queue_s: float | None
    ahead_steps: float | None
    source: str


def from_metrics(rows: list[StepRow], device: RunDevice | None = None) -> list[TimelineRow]:
    """One row per step row: its host parts from the run's clocks and metrics, its time and
    device figures from the run's executions (``device``: ``rundir.executions.attribute``; None
    for a run that recorded none: device not measured, the step's time the host's)."""
    out: list[TimelineRow] = []
    steps = device.steps if device is not None else [None] * len(rows)
    for row, ran in zip(rows, steps, strict=True):
        host_wall = row.wall_s
        cpu, sync = row.host_cpu_s, row.sync_cpu_s
        # A step that compiled mixes tracing with compiling; an eager step whose per-op
        # compiles were not recorded may have compiled.
        unknown_eager = row.eager and row.eager_compiles is None
        if cpu is None or row.compiles or row.eager_compiles or unknown_eager:
            cpu = sync = None
        elif sync is not None:
            cpu -= sync
        compile_s, busy = _device_of(row, ran)
        # A run that recorded its executions times each step as the device ran it; a step
        # whose executions were not all seen (lost samples, no drain) has no time in the run:
        # its host wall says nothing of it when the host ran ahead
        wall = host_wall if ran is None else ran.time_s
        out.append(
            {
                "step": row.step,
                "wall_s": wall,
                "host_wall_s": host_wall,
                "python_tracing_s": cpu,
                "tracing_s": row.tracing_s,
                "graph_build_s": sync,
                "compile_s": compile_s,
                "transfer_s": row.to_device_s + row.from_device_s,
                "device_wait_s": _blocked(row),
                "cpu_wait_s": row.cpu_wait_s,
                "device_busy_s": busy,
                "device_idle_s": None if wall is None or busy is None else max(wall - busy, 0.0),
                "queue_s": None if ran is None else ran.queue_s,
                "ahead_steps": None if ran is None else ran.ahead_steps,
                "source": "metrics",
            }
        )
    return out


def _blocked(row: StepRow) -> float | None:
    """The time the step's sync was blocked (its wall time beyond its CPU time and its
    thread's wait for a CPU inside it: behind a full queue of executions, on a lock), where
    these were recorded and the step compiled nothing (a compile inside the sync is neither).

    A run of an older xlaprof recorded the step's wait for a CPU but not the part of it inside
    the sync: the sync's wall beyond its CPU then holds an unknown share of that wait, and the
    step's whole wait is taken from it, the most the sync can have waited: the least it was
    blocked (the story's host line said blocked 18.80 ms and waiting for a CPU 1.70 ms of a
    30.90 ms step whose CPU was 11.49 ms, 1.09 ms more than the step)."""
    if row.sync_wall_s is None or row.sync_cpu_s is None or row.compiles:
        return None
    waited = row.sync_cpu_wait_s if row.sync_cpu_wait_s is not None else row.cpu_wait_s
    return max(row.sync_wall_s - row.sync_cpu_s - (waited or 0.0), 0.0)


def _device_of(row: StepRow, ran: StepDevice | None) -> tuple[float | None, float | None]:
    """A step's compile and device-busy seconds, eager mode's per-op graphs included.

    The device's busy time is its executions' own (``ran``); a run without executions has it
    not measured. In eager mode torch_xla records per-op compiles and executions in their own
    metrics (``EagerOpExecuteTime``: launch to completion, each op on its own); a step known to
    be eager whose row does not hold them (an older xlaprof) has neither measured.
    """
    if row.eager and row.eager_compile_s is None:
        return None, None
    compile_s = row.compile_s + (row.eager_compile_s or 0.0)
    busy = None if ran is None else ran.device_s
    if row.eager_execute_s:
        busy = (busy or 0.0) + row.eager_execute_s
    return compile_s, busy


def from_trace(
    events: pd.DataFrame,
    rows: list[StepRow],
    bounds: pd.DataFrame | None = None,
    device_busy: dict[int, float | None] | None = None,
    device_windows: pd.DataFrame | None = None,
) -> list[TimelineRow]:
    """Rows for the steps the trace covers (one host: the first).

    A step's wall time is boundary to boundary (``bounds``, from ``Trace.step_bounds``): the
    extent of its events would leave out host time with no events in it (idle Python, sleeps).
    ``device_busy`` is the device model's busy time per host step (the busiest device's
    compute events in the step: ``Trace.tracing_vs_device()``): the device busy of every step
    it has, so the timeline and the device tables agree (and busy never exceeds wall).

    A host without step markers whose devices have their own steps (a ``Steps`` line, module
    executions) gets one row per device step from ``device_windows`` (``Trace.step_times()``'s
    rows of that host: the slowest device's window per step, with ``busy_ms``): a step is one
    device's, never a window stitched over several devices' events.

    Every step at once: a step's events are pairs (event, step), each figure a union of
    intervals per step (``_covered_by_step``), so the work grows with the events, not with
    events x steps.
    """
    made = _trace_steps(events, rows, bounds, device_busy, device_windows)
    return [] if made is None else _rows_of(*made)


_TraceSteps = tuple[
    "_Pairs",
    dict[str, "np.ndarray | None"],
    list[float | None],
    dict[int, float | None],
    dict[int, tuple[int, int]],
]


def _trace_steps(
    events: pd.DataFrame,
    rows: list[StepRow],
    bounds: pd.DataFrame | None,
    device_busy: dict[int, float | None] | None,
    device_windows: pd.DataFrame | None,
) -> _TraceSteps | None:
    """What ``from_trace``'s rows are made of (``_trace_parts``), or None: no step traced."""
    from xlaprof.tables.device import has_lazy_tensor_runtime

    if events.empty:
        return None
    host = timeline_host(events)
    events = events[cols.equals(events["host"], host)]
    host_events = events[events["plane_kind"] == "host"]
    lazy = has_lazy_tensor_runtime(host_events)
    limits: dict[int, tuple[int, int]] = {}
    if bounds is not None and not bounds.empty:
        limits = _limits(bounds[bounds["host"].astype(str) == str(host)])
    pairs: _Pairs | None
    if not limits and device_windows is not None and not device_windows.empty:
        mine = device_windows[device_windows["host"].astype(str) == str(host)]
        limits = _limits(mine)
        device_busy = {
            int(step): None if busy_ms != busy_ms else float(busy_ms) / 1e3
            for step, busy_ms in zip(mine["step"], mine["busy_ms"], strict=True)
        }
        pairs = _window_pairs(events, limits)
    else:
        pairs = _labelled_pairs(events)
        if pairs is None:
            return None
    return _trace_parts(events, host_events, pairs, lazy, rows, device_busy, limits)


def _trace_parts(
    events: pd.DataFrame,
    host_events: pd.DataFrame,
    pairs: _Pairs,
    lazy: bool,
    rows: list[StepRow],
    device_busy: dict[int, float | None] | None,
    limits: dict[int, tuple[int, int]],
) -> _TraceSteps:
    """What ``from_trace``'s rows are made of: the pairs, each part per step, the device's
    busy time per step, the run's tracing seconds per step and the steps' limits."""
    parts, _ = _host_parts(events, host_events, pairs, lazy)
    busy_by_step = _device_busy(events, pairs, rows, device_busy)
    tracing: dict[int, float | None] = {row.step: row.tracing_s for row in rows}
    return pairs, parts, busy_by_step, tracing, limits


def _rows_of(
    pairs: _Pairs,
    parts: dict[str, np.ndarray | None],
    busy_by_step: list[float | None],
    tracing: dict[int, float | None],
    limits: dict[int, tuple[int, int]],
) -> list[TimelineRow]:
    """``from_trace``'s rows, one per step, from ``_trace_parts``."""
    out: list[TimelineRow] = []
    for index, (number, busy, begin, finish) in enumerate(
        zip(pairs.numbers.tolist(), busy_by_step, *pairs.limits(limits), strict=True)
    ):
        wall = finish - begin
        part = {
            name: None if values is None else float(values[index]) for name, values in parts.items()
        }
        out.append(
            {
                "step": number,
                "wall_s": wall / 1e9,
                "host_wall_s": wall / 1e9,
                # the trace does not measure the thread's Python: its rest is no measurement
                "python_tracing_s": None,
                "tracing_s": tracing.get(number),
                "compile_s": part["compile_s"],
                "transfer_s": part["transfer_s"],
                "device_wait_s": part["device_wait_s"],
                "cpu_wait_s": None,  # the scheduler's, which a trace does not record
                "graph_build_s": part["graph_build_s"],
                "device_busy_s": busy,
                "device_idle_s": None if busy is None else max(wall / 1e9 - busy, 0.0),
                "queue_s": None,
                "ahead_steps": None,
                "source": "trace",
            }
        )
    return out


def _frame_of(
    pairs: _Pairs,
    parts: dict[str, np.ndarray | None],
    busy_by_step: list[float | None],
    tracing: dict[int, float | None],
    limits: dict[int, tuple[int, int]],
) -> pd.DataFrame:
    """``_rows_of``'s rows as the timeline's frame, made column by column (the same values:
    a capture of many steps is not turned into a dict per step)."""
    import numpy as np
    import pandas as pd

    numbers = pairs.numbers.tolist()
    begin, finish = (np.array(ends, dtype=np.int64) for ends in pairs.limits(limits))
    wall = (finish - begin) / 1e9
    busy = np.array([np.nan if b is None else b for b in busy_by_step], dtype="float64")
    missing = np.full(len(numbers), np.nan)

    def part(name: str) -> np.ndarray:
        values = parts[name]
        return missing if values is None else np.asarray(values, dtype="float64")

    tracing_s = [tracing.get(number) for number in numbers]
    frame = pd.DataFrame(
        {
            "step": pairs.numbers.astype(np.int64),
            "wall_s": wall,
            "host_wall_s": wall,
            "python_tracing_s": missing,
            "tracing_s": np.array([np.nan if t is None else t for t in tracing_s], dtype="float64"),
            "graph_build_s": part("graph_build_s"),
            "compile_s": part("compile_s"),
            "transfer_s": part("transfer_s"),
            "device_wait_s": part("device_wait_s"),
            "cpu_wait_s": missing,
            "device_busy_s": busy,
            "device_idle_s": np.where(np.isnan(busy), np.nan, np.maximum(wall - busy, 0.0)),
            "queue_s": missing,
            "ahead_steps": missing,
        },
        columns=COLUMNS[:-1],
    )
    frame["source"] = pd.Series(["trace"] * len(frame), dtype="category")
    return frame[COLUMNS]


@dataclass(frozen=True)
class _Pairs:
    """The (event, step) pairs of one host: an event is paired with each step it is in.

    ``numbers`` are the steps (sorted); per pair, ``window`` is its step's index in
    ``numbers`` and ``event`` its event's row in the host's events (None: the pairs are the
    events themselves, each once and in order, as where every event has a step label);
    ``start_ns``/``end_ns`` are the events' own columns (ns), read through ``event`` where
    a figure needs them. An 80 MB capture's 3.7M labelled events held five row-long int64
    arrays here (the step, the event and its interval: 147 MB, a fifth of its analysis' peak
    memory), now two of int32.
    """

    numbers: np.ndarray
    window: np.ndarray
    event: np.ndarray | None
    start_ns: np.ndarray
    end_ns: np.ndarray

    @classmethod
    def of(
        cls,
        events: pd.DataFrame,
        numbers: np.ndarray,
        window: np.ndarray,
        event: np.ndarray | None,
    ) -> _Pairs:
        import numpy as np

        start = events["start_ns"].to_numpy(dtype=np.int64)
        end = events["end_ns"].to_numpy(dtype=np.int64)
        if event is not None and len(events) <= np.iinfo(np.int32).max:
            event = event.astype(np.int32, copy=False)
        return cls(numbers, window, event, start, end)

    def _intervals(self, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The (masked) pairs' starts and ends (ns)."""
        if self.event is None:
            if mask is None:
                return self.start_ns, self.end_ns
            return self.start_ns[mask], self.end_ns[mask]
        from xlaprof.parse.xplane.wire import take

        rows = self.event if mask is None else self.event[mask]
        return take(self.start_ns, rows), take(self.end_ns, rows)

    def mask(self, events_mask: np.ndarray) -> np.ndarray:
        """A mask over the host's events, as a mask over the pairs."""
        if self.event is None:
            return events_mask
        from xlaprof.parse.xplane.wire import take

        return take(events_mask, self.event)

    def covered(self, mask: np.ndarray) -> np.ndarray:
        """Per step, the length of the union of the masked pairs' intervals (ns)."""
        return _covered_by_step(len(self.numbers), self.window[mask], *self._intervals(mask))

    def limits(self, known: dict[int, tuple[int, int]]) -> tuple[list[int], list[int]]:
        """Per step, where it begins and ends (ns): its ``known`` limits (step bounds, device
        windows), else its pairs' extent, made only where a step has no known limits."""
        numbers = self.numbers.tolist()
        if all(number in known for number in numbers):
            return [known[n][0] for n in numbers], [known[n][1] for n in numbers]
        earliest, latest = (ends.tolist() for ends in self.extent())
        limits = [known.get(n, (e, f)) for n, e, f in zip(numbers, earliest, latest, strict=True)]
        return [begin for begin, _ in limits], [end for _, end in limits]

    def extent(self) -> tuple[np.ndarray, np.ndarray]:
        """Per step, its pairs' earliest start and latest end (ns)."""
        import numpy as np

        earliest = np.full(len(self.numbers), np.iinfo(np.int64).max)
        latest = np.full(len(self.numbers), np.iinfo(np.int64).min)
        start, end = self._intervals()
        np.minimum.at(earliest, self.window, start)
        np.maximum.at(latest, self.window, end)
        return earliest, latest


def _window_pairs(events: pd.DataFrame, limits: dict[int, tuple[int, int]]) -> _Pairs:
    """Each window's events: every event of the host that starts in it (by time)."""
    import numpy as np

    start_all = events["start_ns"].to_numpy(dtype=np.int64)
    numbers = np.array(sorted(limits), dtype=np.int64)
    window_start = np.array([limits[n][0] for n in numbers.tolist()], dtype=np.int64)
    window_end = np.array([limits[n][1] for n in numbers.tolist()], dtype=np.int64)
    order = np.argsort(start_all, kind="stable")
    first = np.searchsorted(start_all[order], window_start, side="left")
    last = np.searchsorted(start_all[order], window_end, side="left")
    sizes = np.maximum(last - first, 0)
    window = np.repeat(np.arange(len(numbers), dtype=np.int32), sizes)
    offsets = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return _Pairs.of(events, numbers, window, order[np.repeat(first, sizes) + offsets])


def _labelled_pairs(events: pd.DataFrame) -> _Pairs | None:
    """Each event with a step label in that step; None when no event has one."""
    found = _labels(events["step"])
    if found is None:
        return None
    labelled, label = found
    numbers, window = _numbered(label)  # (which overwrites label: ours to give up)
    return _Pairs.of(events, numbers, window, labelled)


def _labels(step: pd.Series[Any]) -> tuple[np.ndarray | None, np.ndarray] | None:
    """The rows of ``step`` (a nullable whole-number column) that have a label (None: every
    row; int32 where every row fits) and their labels (int32 where every label fits: half the
    memory of a row-long column); None where no row has one. Read ``_CHUNK`` rows at a time:
    pandas' own min and max of the whole column copy it (9 bytes a row), and its labels and
    their rows taken whole were 16 bytes a row more (a 1 GB host's step timeline peaked
    there)."""
    import numpy as np

    count = int(step.count())
    if not count:
        return None
    chunks = [step.iloc[first : first + _CHUNK] for first in range(0, len(step), _CHUNK)]
    known = [chunk for chunk in chunks if chunk.count()]
    low, high = min(int(c.min()) for c in known), max(int(c.max()) for c in known)
    small = np.iinfo(np.int32)
    label = np.empty(count, np.int32 if small.min <= low and high <= small.max else np.int64)
    every = count == len(step)
    rows = None if every else np.empty(count, np.int32 if len(step) <= small.max else np.int64)
    at = 0
    for first, chunk in zip(range(0, len(step), _CHUNK), chunks, strict=True):
        values = chunk.to_numpy(dtype=label.dtype, na_value=0)
        if rows is None:
            label[at : at + len(values)] = values
            at += len(values)
            continue
        found = np.flatnonzero(chunk.notna().to_numpy())
        label[at : at + len(found)] = values[found]
        found += first
        rows[at : at + len(found)] = found
        at += len(found)
    return rows, label


# Rows taken at a time where a row-long temporary is cut into pieces.
_CHUNK = 1 << 18


def _numbered(label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct step numbers of ``label`` (sorted) and each label's index among them
    (int32): from a table of every number between the smallest and the largest where that is
    no larger than the labels (steps are numbered densely), else by sorting. ``label`` is the
    caller's to give up: the dense way overwrites it with its offsets from the smallest, and
    int32 labels then with their indices (returned as the indices)."""
    import numpy as np

    low, high = int(label.min()), int(label.max())
    if high - low < 4 * len(label):
        present = np.zeros(high - low + 1, dtype=bool)
        wide = high - low > np.iinfo(np.int32).max  # int32 labels whose offsets do not fit
        offset = label.astype(np.int64) if wide else label
        offset -= low  # (in place: a row-long array less)
        present[offset] = True
        index = np.cumsum(present, dtype=np.int32) - 1
        if offset is label and label.dtype == np.int32:
            # each label's index written over it, a piece at a time: no row-long array more
            # (a 1 GB host's analysis peaked here, 4 bytes an event above the rest)
            for first in range(0, len(label), _CHUNK):
                piece = label[first : first + _CHUNK]
                piece[...] = index[piece]
            return np.flatnonzero(present) + low, label
        return np.flatnonzero(present) + low, index[offset]
    numbers = np.unique(label)
    return numbers, np.searchsorted(numbers, label).astype(np.int32)


def _host_parts(
    events: pd.DataFrame, host_events: pd.DataFrame, pairs: _Pairs, lazy: bool
) -> tuple[dict[str, np.ndarray | None], np.ndarray]:
    """Per step, the host's compile, transfer, wait and graph-build seconds on its main line
    (None where not measured), and the union of all four (ns)."""
    import numpy as np

    names = events["name"]
    main_line = "python" if lazy else _marker_line(events)
    main = pairs.mask(
        cols.equals(events["plane_kind"], "host") & cols.equals(events["line"], main_line)
    )
    # Each category's own time is what it adds to the union of those before it (a transfer
    # inside a compile counts once, as compile).
    parts: dict[str, np.ndarray | None] = {}
    taken = np.zeros(len(pairs.window), bool)
    before = np.zeros(len(pairs.numbers), np.int64)
    for label_name, patterns in (
        ("compile_s", _COMPILE),
        ("transfer_s", _TRANSFER),
        ("device_wait_s", _WAIT),
        ("graph_build_s", _GRAPH),
    ):
        taken |= main & pairs.mask(cols.contains(names, "|".join(patterns)))
        now = pairs.covered(taken)
        parts[label_name] = (now - before) / 1e9
        before = now
    if not lazy:
        # No lazy-tensor runtime here (JAX, PyTorch eager): its parts were not measured,
        # and the host's time is not lazy tracing. A PJRT client that records its calls
        # records its compiles: a step without one compiled nothing (0.0); a capture without
        # PJRT calls (PyTorch eager) did not measure compiles, nor one without a stepping line
        # to read them on (steps from the device's windows alone: the TPU capture's four
        # backend_compile spans, 1.53 s, read as 0.0 in every step).
        parts = dict.fromkeys(parts)
        pjrt = cols.member(host_events["name"], _PJRT_COMPILE + _PJRT_EXECUTE).any()
        if main_line is not None and pjrt:
            compiles = main & pairs.mask(cols.contains(names, "|".join(_PJRT_COMPILE)))
            parts["compile_s"] = pairs.covered(compiles) / 1e9
    return parts, before


def _device_busy(
    events: pd.DataFrame,
    pairs: _Pairs,
    rows: list[StepRow],
    device_busy: dict[int, float | None] | None,
) -> list[float | None]:
    """Per step, the device's busy seconds in the step's window: the device model's where it
    has the step, else the ``XLA Modules`` line's union, else (a device plane) not measured,
    else the host's CPU executions (``ThunkExecutor::Execute``). A run's traced steps take
    their device figures from the run's executions instead (``step_timeline``)."""
    import numpy as np

    del rows
    has_devices = bool((events["plane_kind"] == "device").any())
    has_modules = bool((events["line"] == MODULES_LINE).any())
    device = pairs.mask(cols.equals(events["plane_kind"], "device"))
    device_events = np.bincount(pairs.window[device], minlength=len(pairs.numbers))
    modules = pairs.covered(device & pairs.mask(cols.equals(events["line"], MODULES_LINE)))
    cpu_execute = pairs.covered(pairs.mask(cols.contains(events["name"], _CPU_EXECUTE)))
    out: list[float | None] = []
    for index, number in enumerate(pairs.numbers.tolist()):
        if device_busy and number in device_busy:
            out.append(device_busy[number])
        elif has_modules and device_events[index]:
            out.append(int(modules[index]) / 1e9)
        elif has_devices:
            out.append((device_busy or {}).get(number))
        else:
            out.append(int(cpu_execute[index]) / 1e9)
    return out


def _limits(rows: pd.DataFrame) -> dict[int, tuple[int, int]]:
    """Step -> (start_ns, end_ns) of ``rows`` (step bounds, or device windows)."""
    import numpy as np

    steps = rows["step"].to_numpy(dtype=np.int64).tolist()
    starts = rows["start_ns"].to_numpy(dtype=np.int64).tolist()
    ends = rows["end_ns"].to_numpy(dtype=np.int64).tolist()
    return dict(zip(steps, zip(starts, ends, strict=True), strict=True))


def _covered_by_step(
    steps: int, window: np.ndarray, start: np.ndarray, end: np.ndarray
) -> np.ndarray:
    """Per step (``window``: each interval's step, an index below ``steps``), the length of
    the union of its intervals (0: none).

    Sorted by step then start, each interval adds what reaches past every earlier interval of
    its step: ``max(0, end - max(start, reach))``, ``reach`` the running maximum of the ends
    before it in the step.
    """
    import numpy as np
    import pandas as pd

    out = np.zeros(steps, np.int64)
    if not len(window):
        return out
    order = np.lexsort((start, window))
    window, start, end = window[order], start[order], end[order]
    reach = pd.Series(end).groupby(window).cummax().to_numpy()
    previous = np.empty_like(reach)
    previous[1:] = reach[:-1]
    first = np.ones(len(window), bool)
    first[1:] = window[1:] != window[:-1]
    previous[first] = np.iinfo(np.int64).min
    added = np.maximum(end - np.maximum(start, previous), 0)
    np.add.at(out, window, added)
    return out


def _marker_line(events: pd.DataFrame) -> str | None:
    """The host line that holds the step markers (``step_num``): the stepping thread."""
    marked = events[(events["plane_kind"] == "host") & events["step_num"].notna()]
    if marked.empty:
        return None
    return str(marked["line"].astype(str).mode().iloc[0])


def timeline_host(events: pd.DataFrame) -> str:
    """The host whose steps the timeline of ``events`` reads: the first of their hosts (a
    capture's one host; of several, the first category)."""
    return str(events["host"].cat.categories[0])


def device_busy_by_step(tracing: pd.DataFrame, events: pd.DataFrame) -> dict[int, float | None]:
    """The device model's busy time per step of the events' first host (the one ``from_trace``
    reads), from ``Trace.tracing_vs_device()``."""
    if tracing.empty or events.empty:
        return {}
    host = timeline_host(events)
    mine = tracing[tracing["host"].astype(str) == host]
    return {
        int(step): None if busy is None or busy != busy else float(busy)
        for step, busy in zip(mine["step"], mine["device_busy_s"], strict=True)
    }


def step_timeline(
    rows: list[StepRow],
    trace_events: pd.DataFrame | None = None,
    step_bounds: pd.DataFrame | None = None,
    device_busy: dict[int, float | None] | None = None,
    device_windows: pd.DataFrame | None = None,
    device: RunDevice | None = None,
) -> pd.DataFrame:
    """One row per step: trace-derived where the trace covers the step, metrics otherwise.

    ``device_busy``: the device model's busy time per step of the trace's first host;
    ``device_windows``: its device steps where it has no step markers (see ``from_trace``);
    ``device``: the run's executions attributed to its steps (``rundir.executions``).
    """
    import pandas as pd

    if not rows and trace_events is not None:  # a capture alone: made column by column
        made = _trace_steps(trace_events, rows, step_bounds, device_busy, device_windows)
        if made is not None:
            return _frame_of(*made)
    by_step: dict[int, TimelineRow] = {r["step"]: r for r in from_metrics(rows, device)}
    if trace_events is not None:
        for row in from_trace(trace_events, rows, step_bounds, device_busy, device_windows):
            recorded = by_step.get(row["step"])
            if recorded is not None:
                _measured_by_the_run(row, recorded)
            by_step[row["step"]] = row
    frame = pd.DataFrame([by_step[k] for k in sorted(by_step)], columns=COLUMNS)
    for column in COLUMNS[1:-1]:  # not measured -> NaN (None in JSON, "—" on screen)
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    frame["source"] = frame["source"].astype("category")
    return frame


def trace_timeline(
    view: Trace, rows: list[StepRow] | None = None, device: RunDevice | None = None
) -> pd.DataFrame:
    """``step_timeline`` of ``view`` (``Trace.step_view``: its first host is the one the
    timeline reads) and the run's step ``rows``: the device model's busy time per step, and
    the devices' own steps where that host has no step markers (``device_windows``).

    The one way the timeline of a trace is made: by the pipeline, and by a pod's worker for
    its host (kept beside its cache, so the parent reads no events for it).
    """
    events = view.events
    busy = device_busy_by_step(view.tracing_vs_device(), events)
    bounds = view.step_bounds
    windows = None
    if not _has_bounds(events, bounds):  # only a host without step markers reads them
        windows = device_windows(view)
    return step_timeline(rows or [], events, bounds, busy, windows, device)


def _has_bounds(events: pd.DataFrame, bounds: pd.DataFrame | None) -> bool:
    """Whether the events' first host (the one the timeline reads) has host step bounds."""
    if events.empty or bounds is None or bounds.empty:
        return False
    host = timeline_host(events)
    return bool((bounds["host"].astype(str) == host).any())


def device_windows(trace: Trace) -> pd.DataFrame | None:
    """Per host step from the devices' own steps (hosts without step markers): the slowest
    device's window (``step_times``) with that device's busy time, or None."""
    from xlaprof.tables.step_times import step_times

    windows = step_times(trace)
    windows = windows[windows["source"] != "host steps"]
    if windows.empty:
        return None
    per_device = step_times(trace, per_device=True)[["host", "device", "step", "busy_ms"]]
    per_device = per_device.astype({"host": str, "device": str})
    windows = windows.astype({"host": str, "device": str})
    return windows.merge(per_device, on=["host", "device", "step"], how="left")


def _measured_by_the_run(row: TimelineRow, recorded: TimelineRow) -> None:
    """A traced step's figures that the run measured and the trace does not, so a step gets the
    same figures whether or not a trace window held it: its time in the run, queue and
    run-ahead (from the run's executions: the trace window ends before a step's graph has run
    when the host runs ahead), and the thread's CPU time (host work is measured one way, by the
    stepping thread's CPU clock: Python + tracing outside the sync, the graph build inside it;
    where the run did not split off the sync's CPU, less the graph build the trace measured).
    The time blocked on the device is the larger of the sync's blocked time and the trace's
    wait spans. The trace keeps what it measures best: compile and transfer spans, and the
    device's busy time, which the device model reads from the step's events in the step's
    place in the run (``Trace`` loaded with the run's device windows), so the device tables
    agree."""
    python = recorded["python_tracing_s"]
    build = recorded["graph_build_s"]
    if python is not None and build is None and row["graph_build_s"]:
        python = max(python - row["graph_build_s"], 0.0)
        build = row["graph_build_s"]
    row["python_tracing_s"] = python
    # where the run did not measure the thread's CPU (a step that compiled: tracing and
    # compiling mix in it), neither does the trace stand in with its spans' wall time
    row["graph_build_s"] = build if python is not None or build is not None else None
    row["host_wall_s"] = recorded["host_wall_s"]
    row["cpu_wait_s"] = recorded["cpu_wait_s"]
    if recorded["device_wait_s"] is not None:
        # Two measures of the host blocked on the device: the sync's own clocks (its wall
        # beyond its CPU time and its wait for a CPU: a sync behind a full queue or a lock,
        # which no trace span names) and the trace's wait spans (anywhere in the step: a read
        # waiting for its graph, outside the sync). Neither holds the other's whole, and they
        # overlap where a span is inside the sync: the larger is the least that was waited.
        row["device_wait_s"] = max(row["device_wait_s"] or 0.0, recorded["device_wait_s"])
    if recorded["device_busy_s"] is None and recorded["queue_s"] is None:
        return  # no executions recorded (an older run): the trace's own figures stand
    row["wall_s"] = recorded["wall_s"]
    row["queue_s"] = recorded["queue_s"]
    row["ahead_steps"] = recorded["ahead_steps"]
    if row["device_busy_s"] is None:
        row["device_busy_s"] = recorded["device_busy_s"]
    wall, busy = row["wall_s"], row["device_busy_s"]
    if wall is not None and busy is not None:
        row["device_busy_s"] = min(busy, wall)
        row["device_idle_s"] = max(wall - busy, 0.0)


def steady_median(timeline: pd.DataFrame, warmup_steps: int) -> tuple[pd.Series, int]:
    """The steady step of median wall time (its row: its parts add up to its wall time, where
    medians taken column by column would not) and how many steady steps there are: after
    warm-up (the first ``warmup_steps`` steps by position, ``model.warmup``) and, where the
    step model marked them (``steady``), compiling nothing. The console's median row, the
    story and ``xlaprof mcp`` show this step."""
    first = first_steady_of(timeline, warmup_steps, "compile_s")
    steady = timeline[timeline["step"] >= first]
    if "steady" in steady:
        steady = steady[steady["steady"].astype(bool)]
    steady = steady[steady["wall_s"].notna()]
    if steady.empty:
        return timeline.iloc[:0][COLUMNS[1:-1]].median(), 0
    ordered = steady.sort_values("wall_s", kind="stable")
    return ordered.iloc[(len(ordered) - 1) // 2], len(steady)


def steady_step(timeline: pd.DataFrame | None, warmup_steps: int) -> SteadyStep | None:
    """The steady state of ``timeline`` (``steady_median`` over every row given): the steady
    steps' count, the median one and its row's figures (``COLUMNS`` but the step and source;
    not measured as None), and its bound; None without a steady step."""
    from xlaprof.model.result import SteadyStep

    if timeline is None or timeline.empty:
        return None
    median, count = steady_median(timeline, warmup_steps)
    if not count:
        return None
    figures = {c: _plain_number(median[c]) for c in COLUMNS[1:-1] if c in median}
    bound = median.get("bound")
    return SteadyStep(
        steps=count,
        warmup_steps=warmup_steps,
        median_step=int(median["step"]),
        median_s=figures,
        bound=bound if isinstance(bound, str) else None,
    )


def _plain_number(value: object) -> float | int | None:
    """A cell of a timeline row as a plain number, None where not measured (NaN, NA)."""
    import math

    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return None
    item = getattr(value, "item", None)
    number = item() if callable(item) else value
    if isinstance(number, bool) or not isinstance(number, int | float):
        return None
    if isinstance(number, float) and not math.isfinite(number):
        return None
    return number
