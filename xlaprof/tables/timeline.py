"""The step timeline: where each step's wall time went, on the host and on the device.

Columns (seconds): ``wall_s``; host side ``python_tracing_s`` (user Python and lazy tracing:
what is left when torch_xla's own work is taken out), ``graph_build_s`` (collecting and
hashing the graph at sync), ``compile_s``, ``transfer_s``, ``device_wait_s`` (the host blocked
on the device); device side ``device_busy_s`` and ``device_idle_s``. ``source`` says whether a
row came from the trace (exact intervals) or from per-step metrics (sums of metric deltas).

From metrics alone the host split is coarser: ``device_wait_s`` is not measured (None, shown
as "—"); ``python_tracing_s`` is the stepping thread's CPU time before the sync that ended the
step and ``graph_build_s`` its CPU time inside that sync (the sync hook reads the thread's clock
as the call enters), so time the host spent blocked (on the device, on I/O) is in neither. Where
no sync ended the step (``xlaprof.step`` marks) the whole step's CPU time is
``python_tracing_s`` and ``graph_build_s`` is not measured. In a step that compiled, that CPU
time mixes tracing with compiling (XLA compiles on other threads too, so the two cannot be told
apart): there neither is measured. ``tracing_s`` (the LazyTracing
metric) is kept as its own column either way: it is the part of Python time spent building IR.

From a trace without lazy-tensor runtime events (JAX, PyTorch eager: no torch_xla on the host)
there is no lazy tracing to split off: ``python_tracing_s``, ``graph_build_s``, ``transfer_s``,
``device_wait_s`` and ``tracing_s`` are not measured (None). ``compile_s`` is measured where the
host records PJRT C API calls (JAX: ``PJRT_Client_Compile`` inside ``backend_compile_and_load``),
and device busy comes from the device model (the busiest device's compute events in the step):
GPUs have no ``XLA Modules`` line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlaprof.parse.events import MODULES_LINE
from xlaprof.rundir.schema import StepRow
from xlaprof.tables import categorical as cols
from xlaprof.tables.intervals import Coverage

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

COLUMNS = [
    "step",
    "wall_s",
    "python_tracing_s",
    "tracing_s",
    "graph_build_s",
    "compile_s",
    "transfer_s",
    "device_wait_s",
    "device_busy_s",
    "device_idle_s",
    "source",
]
# Host events on the main (python) line, by category, highest precedence first: a transfer
# inside a compile counts once, as compile.
_COMPILE = ("XLAGraphExecutor::Compile",)
_TRANSFER = ("TransferToDevice", "TransferFromDevice")
_WAIT = ("WaitDeviceOps",)
_GRAPH = ("SyncTensorsGraphInternal",)
_CPU_EXECUTE = "ThunkExecutor::Execute"
# Without a lazy-tensor runtime: the PJRT C API's calls, which any PJRT client (JAX, plugins)
# records; JAX's span around a compile holds the PJRT call.
_PJRT_COMPILE = ("PJRT_Client_Compile", "backend_compile_and_load", "backend_compile")
_PJRT_EXECUTE = ("PJRT_LoadedExecutable_Execute",)


def _covered_ns(frame: pd.DataFrame) -> int:
    """The length of the union of ``frame``'s event intervals."""
    return Coverage.of(frame["start_ns"].to_numpy(), frame["end_ns"].to_numpy()).total


def from_metrics(rows: list[StepRow]) -> list[dict[str, object]]:
    out = []
    for row in rows:
        wall = row.wall_s
        cpu, sync = row.host_cpu_s, row.sync_cpu_s
        # A step that compiled mixes tracing with compiling; an eager step whose per-op
        # compiles were not recorded may have compiled.
        unknown_eager = row.eager and row.eager_compiles is None
        if cpu is None or row.compiles or row.eager_compiles or unknown_eager:
            cpu = sync = None
        elif sync is not None:
            cpu -= sync
        compile_s, busy = _with_eager(row)
        out.append(
            {
                "step": row.step,
                "wall_s": wall,
                "python_tracing_s": cpu,
                "tracing_s": row.tracing_s,
                "graph_build_s": sync,
                "compile_s": compile_s,
                "transfer_s": row.to_device_s + row.from_device_s,
                "device_wait_s": None,
                # ExecuteTime can hold an execution queued in the step before: never above wall
                "device_busy_s": busy if wall is None or busy is None else min(busy, wall),
                "device_idle_s": None if wall is None or busy is None else max(wall - busy, 0.0),
                "source": "metrics",
            }
        )
    return out


def _with_eager(row: StepRow) -> tuple[float | None, float | None]:
    """A step's compile and device-busy seconds, eager mode's per-op graphs included.

    In eager mode torch_xla records per-op compiles and executions in their own metrics; a step
    known to be eager whose row does not hold them (an older xlaprof) has neither measured.
    """
    if row.eager and row.eager_compile_s is None:
        return None, None
    return (
        row.compile_s + (row.eager_compile_s or 0.0),
        row.execute_s + (row.eager_execute_s or 0.0),
    )


def from_trace(
    events: pd.DataFrame,
    rows: list[StepRow],
    bounds: pd.DataFrame | None = None,
    device_busy: dict[int, float | None] | None = None,
    device_windows: pd.DataFrame | None = None,
) -> list[dict[str, object]]:
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
    import numpy as np

    from xlaprof.tables.device import has_lazy_tensor_runtime

    if events.empty:
        return []
    host = events["host"].cat.categories[0]
    events = events[cols.equals(events["host"], host)]
    has_devices = bool((events["plane_kind"] == "device").any())
    has_modules = bool((events["line"] == MODULES_LINE).any())
    host_events = events[events["plane_kind"] == "host"]
    lazy = has_lazy_tensor_runtime(host_events)
    main_line = "python" if lazy else _marker_line(events)
    # A PJRT client that records its calls records its compiles: a step without one compiled
    # nothing (0.0); a capture without PJRT calls (PyTorch eager) did not measure compiles.
    pjrt = not lazy and bool(cols.member(host_events["name"], _PJRT_COMPILE + _PJRT_EXECUTE).any())
    limits: dict[int, tuple[int, int]] = {}
    if bounds is not None and not bounds.empty:
        limits = _limits(bounds[bounds["host"].astype(str) == str(host)])
    by_device = not limits and device_windows is not None and not device_windows.empty
    start_all = events["start_ns"].to_numpy(dtype=np.int64)
    if by_device:
        assert device_windows is not None
        mine = device_windows[device_windows["host"].astype(str) == str(host)]
        limits = _limits(mine)
        device_busy = {
            int(r.step): None if r.busy_ms != r.busy_ms else float(r.busy_ms) / 1e3
            for r in mine.itertuples()
        }
        # each window's events: every event of the host that starts in it (by time)
        numbers = np.array(sorted(limits), dtype=np.int64)
        window_start = np.array([limits[n][0] for n in numbers.tolist()], dtype=np.int64)
        window_end = np.array([limits[n][1] for n in numbers.tolist()], dtype=np.int64)
        order = np.argsort(start_all, kind="stable")
        first = np.searchsorted(start_all[order], window_start, side="left")
        last = np.searchsorted(start_all[order], window_end, side="left")
        sizes = np.maximum(last - first, 0)
        pair_window = np.repeat(np.arange(len(numbers)), sizes)
        offsets = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        pair_event = order[np.repeat(first, sizes) + offsets]
    else:
        labelled = np.flatnonzero(events["step"].notna().to_numpy())
        if not len(labelled):
            return []
        label = events["step"].to_numpy(dtype=np.int64, na_value=0)[labelled]
        numbers = np.unique(label)
        pair_window = np.searchsorted(numbers, label)
        pair_event = labelled
    start = start_all[pair_event]
    end = events["end_ns"].to_numpy(dtype=np.int64)[pair_event]
    step = numbers[pair_window]

    def of_pairs(mask: np.ndarray) -> np.ndarray:
        """A mask over the host's events, as a mask over the pairs."""
        return mask[pair_event]

    def covered(mask: np.ndarray) -> np.ndarray:
        return _covered_by_step(numbers, step[mask], start[mask], end[mask])

    earliest = np.full(len(numbers), np.iinfo(np.int64).max)
    latest = np.full(len(numbers), np.iinfo(np.int64).min)
    np.minimum.at(earliest, pair_window, start)
    np.maximum.at(latest, pair_window, end)
    names = events["name"]
    main = of_pairs(
        cols.equals(events["plane_kind"], "host") & cols.equals(events["line"], main_line)
    )
    # Each category's own time is what it adds to the union of those before it (a transfer
    # inside a compile counts once, as compile).
    parts: dict[str, np.ndarray | None] = {}
    taken = np.zeros(len(pair_event), bool)
    before = np.zeros(len(numbers), np.int64)
    for label_name, patterns in (
        ("compile_s", _COMPILE),
        ("transfer_s", _TRANSFER),
        ("device_wait_s", _WAIT),
        ("graph_build_s", _GRAPH),
    ):
        taken |= main & of_pairs(cols.contains(names, "|".join(patterns)))
        now = covered(taken)
        parts[label_name] = (now - before) / 1e9
        before = now
    if not lazy:
        # No lazy-tensor runtime here (JAX, PyTorch eager): its parts were not measured,
        # and the host's time is not lazy tracing. A PJRT client's compile calls are.
        parts = dict.fromkeys(parts)
        if pjrt:
            compiles = main & of_pairs(cols.contains(names, "|".join(_PJRT_COMPILE)))
            parts["compile_s"] = covered(compiles) / 1e9
    device = of_pairs(cols.equals(events["plane_kind"], "device"))
    device_events = np.bincount(pair_window[device], minlength=len(numbers))
    modules = covered(device & of_pairs(cols.equals(events["line"], MODULES_LINE)))
    cpu_execute = covered(of_pairs(cols.equals(names, _CPU_EXECUTE)))
    tracing = {row.step: row.tracing_s for row in rows}
    execute = {row.step: row.execute_s for row in rows}
    out = []
    for index, number in enumerate(numbers.tolist()):
        begin, finish = limits.get(number, (int(earliest[index]), int(latest[index])))
        wall = finish - begin
        busy: float | None
        if device_busy and number in device_busy:
            busy = device_busy[number]
        elif has_modules and device_events[index]:
            busy = int(modules[index]) / 1e9
        elif has_devices:
            busy = (device_busy or {}).get(number)
        elif number in execute:
            busy = execute[number]
        else:
            busy = int(cpu_execute[index]) / 1e9
        out.append(
            {
                "step": number,
                "wall_s": wall / 1e9,
                "python_tracing_s": max(wall - int(before[index]), 0) / 1e9 if lazy else None,
                "tracing_s": tracing.get(number),
                **{
                    name: None if values is None else float(values[index])
                    for name, values in parts.items()
                },
                "device_busy_s": busy,
                "device_idle_s": None if busy is None else max(wall / 1e9 - busy, 0.0),
                "source": "trace",
            }
        )
    return out


def _limits(rows: pd.DataFrame) -> dict[int, tuple[int, int]]:
    """Step -> (start_ns, end_ns) of ``rows`` (step bounds, or device windows)."""
    import numpy as np

    steps = rows["step"].to_numpy(dtype=np.int64).tolist()
    starts = rows["start_ns"].to_numpy(dtype=np.int64).tolist()
    ends = rows["end_ns"].to_numpy(dtype=np.int64).tolist()
    return dict(zip(steps, zip(starts, ends, strict=True), strict=True))


def _covered_by_step(
    numbers: np.ndarray, step: np.ndarray, start: np.ndarray, end: np.ndarray
) -> np.ndarray:
    """Per step in ``numbers`` (sorted), the length of the union of its intervals (0: none).

    Sorted by step then start, each interval adds what reaches past every earlier interval of
    its step: ``max(0, end - max(start, reach))``, ``reach`` the running maximum of the ends
    before it in the step.
    """
    import numpy as np
    import pandas as pd

    out = np.zeros(len(numbers), np.int64)
    if not len(step):
        return out
    order = np.lexsort((start, step))
    step, start, end = step[order], start[order], end[order]
    reach = pd.Series(end).groupby(step).cummax().to_numpy()
    previous = np.empty_like(reach)
    previous[1:] = reach[:-1]
    first = np.ones(len(step), bool)
    first[1:] = step[1:] != step[:-1]
    previous[first] = np.iinfo(np.int64).min
    added = np.maximum(end - np.maximum(start, previous), 0)
    np.add.at(out, np.searchsorted(numbers, step), added)
    return out


def _marker_line(events: pd.DataFrame) -> str | None:
    """The host line that holds the step markers (``step_num``): the stepping thread."""
    marked = events[(events["plane_kind"] == "host") & events["step_num"].notna()]
    if marked.empty:
        return None
    return str(marked["line"].astype(str).mode().iloc[0])


def device_busy_by_step(tracing: pd.DataFrame, events: pd.DataFrame) -> dict[int, float | None]:
    """The device model's busy time per step of the events' first host (the one ``from_trace``
    reads), from ``Trace.tracing_vs_device()``."""
    if tracing.empty or events.empty:
        return {}
    host = str(events["host"].cat.categories[0])
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
) -> pd.DataFrame:
    """One row per step: trace-derived where the trace covers the step, metrics otherwise.

    ``device_busy``: the device model's busy time per step of the trace's first host;
    ``device_windows``: its device steps where it has no step markers (see ``from_trace``).
    """
    import pandas as pd

    by_step = {r["step"]: r for r in from_metrics(rows)}
    if trace_events is not None:
        for row in from_trace(trace_events, rows, step_bounds, device_busy, device_windows):
            by_step[row["step"]] = row
    frame = pd.DataFrame([by_step[k] for k in sorted(by_step)], columns=COLUMNS)
    for column in COLUMNS[1:-1]:  # not measured -> NaN (None in JSON, "—" on screen)
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    frame["source"] = frame["source"].astype("category")
    return frame


def steady_median(timeline: pd.DataFrame, warmup_steps: int) -> tuple[pd.Series, int]:
    """The steady step of median wall time (its row: its parts add up to its wall time, where
    medians taken column by column would not) and how many steady steps there are: after
    warm-up (``step >= warmup_steps``) and, where the step model marked them (``steady``),
    compiling nothing. The console's median row, the story and ``xlaprof mcp`` show this step."""
    steady = timeline[timeline["step"] >= warmup_steps]
    if "steady" in steady:
        steady = steady[steady["steady"].astype(bool)]
    steady = steady[steady["wall_s"].notna()]
    if steady.empty:
        return timeline.iloc[:0][COLUMNS[1:-1]].median(), 0
    ordered = steady.sort_values("wall_s", kind="stable")
    return ordered.iloc[(len(ordered) - 1) // 2], len(steady)
