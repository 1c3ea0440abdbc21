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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xlaprof.parse.events import MODULES_LINE
from xlaprof.rundir.schema import StepRow
from xlaprof.tables import categorical as cols
from xlaprof.tables.intervals import Coverage

if TYPE_CHECKING:
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
_HOST_PARTS = {
    "compile_s": ("XLAGraphExecutor::Compile",),
    "transfer_s": ("TransferToDevice", "TransferFromDevice"),
    "device_wait_s": ("WaitDeviceOps",),
    "graph_build_s": ("SyncTensorsGraphInternal",),
}
_CPU_EXECUTE = "ThunkExecutor::Execute"
# Without a lazy-tensor runtime: the PJRT C API's calls, which any PJRT client (JAX, plugins)
# records; JAX's span around a compile holds the PJRT call.
_PJRT_COMPILE = ("PJRT_Client_Compile", "backend_compile_and_load", "backend_compile")
_PJRT_EXECUTE = ("PJRT_LoadedExecutable_Execute",)


def _covered_ns(frame: pd.DataFrame) -> int:
    """The length of the union of ``frame``'s event intervals."""
    return Coverage.of(frame["start_ns"].to_numpy(), frame["end_ns"].to_numpy()).total


def from_metrics(rows: list[StepRow]) -> dict[int, dict[str, object]]:
    """Rows by step from the per-step metrics (of two rows of one step, the last)."""
    out: dict[int, dict[str, object]] = {}
    for row in rows:
        wall = row.wall_s
        cpu, sync = row.host_cpu_s, row.sync_cpu_s
        if cpu is None or row.compiles:
            cpu = sync = None
        elif sync is not None:
            cpu -= sync
        out[row.step] = {
            "step": row.step,
            "wall_s": wall,
            "python_tracing_s": cpu,
            "tracing_s": row.tracing_s,
            "graph_build_s": sync,
            "compile_s": row.compile_s,
            "transfer_s": row.to_device_s + row.from_device_s,
            "device_wait_s": None,
            "device_busy_s": row.execute_s,
            "device_idle_s": None if wall is None else max(wall - row.execute_s, 0.0),
            "source": "metrics",
        }
    return out


@dataclass(frozen=True)
class _Host:
    """What holds for every step of the host ``from_trace`` reads."""

    main_line: str | None  # the stepping thread's line
    lazy: bool  # the host records the lazy-tensor runtime's events
    pjrt: bool  # without it, the host records a PJRT client's compile and execute calls
    has_devices: bool
    has_modules: bool  # the devices have an ``XLA Modules`` line
    device_busy: dict[int, float | None]
    execute: dict[int, float]  # ExecuteTime per step, from the metrics


def from_trace(
    events: pd.DataFrame,
    rows: list[StepRow],
    bounds: pd.DataFrame | None = None,
    device_busy: dict[int, float | None] | None = None,
) -> dict[int, dict[str, object]]:
    """Rows by step, for the steps the trace covers (one host: the first).

    A step's wall time is boundary to boundary (``bounds``, from ``Trace.step_bounds``): the
    extent of its events would leave out host time with no events in it (idle Python, sleeps).
    ``device_busy`` is the device model's busy time per host step (the busiest device's
    compute events in the step: ``Trace.tracing_vs_device()``); it is used where the host has
    device planes without an ``XLA Modules`` line (GPUs).
    """
    from xlaprof.tables.device import has_lazy_tensor_runtime

    if events.empty:
        return {}
    host_name = events["host"].cat.categories[0]
    events = events[events["host"] == host_name]
    host_events = events[events["plane_kind"] == "host"]
    lazy = has_lazy_tensor_runtime(host_events)
    # A PJRT client that records its calls records its compiles: a step without one compiled
    # nothing (0.0); a capture without PJRT calls (PyTorch eager) did not measure compiles.
    pjrt_calls = cols.member(host_events["name"], _PJRT_COMPILE + _PJRT_EXECUTE)
    host = _Host(
        main_line="python" if lazy else _marker_line(events),
        lazy=lazy,
        pjrt=not lazy and bool(pjrt_calls.any()),
        has_devices=bool((events["plane_kind"] == "device").any()),
        has_modules=bool((events["line"] == MODULES_LINE).any()),
        device_busy=device_busy or {},
        execute={row.step: row.execute_s for row in rows},
    )
    limits = {}
    if bounds is not None and not bounds.empty:
        mine = bounds[bounds["host"] == host_name]
        limits = {int(r.step): (int(r.start_ns), int(r.end_ns)) for r in mine.itertuples()}
    tracing = {row.step: row.tracing_s for row in rows}
    out: dict[int, dict[str, object]] = {}
    step: Any  # a group's key: its step number
    for step, group in events[events["step"].notna()].groupby("step", observed=True):
        number = int(step)
        start, end = limits.get(number, (int(group["start_ns"].min()), int(group["end_ns"].max())))
        wall = end - start
        parts, python_tracing = _host_parts(host, group, wall)
        busy = _device_busy(host, group, number)
        out[number] = {
            "step": number,
            "wall_s": wall / 1e9,
            "python_tracing_s": python_tracing,
            "tracing_s": tracing.get(number),
            **parts,
            "device_busy_s": busy,
            "device_idle_s": None if busy is None else max(wall / 1e9 - busy, 0.0),
            "source": "trace",
        }
    return out


def _host_parts(
    host: _Host, group: pd.DataFrame, wall: int
) -> tuple[dict[str, float | None], float | None]:
    """A step's host time by category (compile, transfer, device wait, graph build: seconds,
    None where not measured), and the Python and lazy tracing that is left of its wall time."""
    import pandas as pd

    main = group[(group["plane_kind"] == "host") & (group["line"] == host.main_line)]
    names = main["name"].astype(str)

    def spans(patterns: tuple[str, ...]) -> pd.DataFrame:
        return main[names.str.contains("|".join(patterns), regex=True)]

    if not host.lazy:
        # No lazy-tensor runtime here (JAX, PyTorch eager): its parts were not measured,
        # and the host's time is not lazy tracing. A PJRT client's compile calls are.
        parts: dict[str, float | None] = dict.fromkeys(_HOST_PARTS)
        if host.pjrt:
            parts["compile_s"] = _covered_ns(spans(_PJRT_COMPILE)) / 1e9
        return parts, None
    # Each category's own time is what it adds to the union of those before it (a transfer
    # inside a compile counts once, as compile).
    parts = {}
    taken = main.iloc[:0]
    covered = 0
    for label, patterns in _HOST_PARTS.items():
        taken = pd.concat([taken, spans(patterns)])
        now = _covered_ns(taken)
        parts[label] = (now - covered) / 1e9
        covered = now
    return parts, max(wall - covered, 0) / 1e9


def _device_busy(host: _Host, group: pd.DataFrame, step: int) -> float | None:
    """A step's device busy time (seconds): its ``XLA Modules`` events' union where devices
    have that line, else the device model's, else the metrics' ExecuteTime, else the union of
    the CPU client's executions."""
    device = group[group["plane_kind"] == "device"]
    if host.has_modules and not device.empty:
        return _covered_ns(device[device["line"] == MODULES_LINE]) / 1e9
    if host.has_devices:
        return host.device_busy.get(step)
    if step in host.execute:
        return host.execute[step]
    return _covered_ns(group[group["name"] == _CPU_EXECUTE]) / 1e9


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
) -> pd.DataFrame:
    """One row per step: trace-derived where the trace covers the step, metrics otherwise.

    ``device_busy``: the device model's busy time per step of the trace's first host (see
    ``from_trace``), for captures whose devices have no ``XLA Modules`` line.
    """
    import pandas as pd

    by_step = from_metrics(rows)
    if trace_events is not None:
        by_step.update(from_trace(trace_events, rows, step_bounds, device_busy))
    frame = pd.DataFrame([by_step[k] for k in sorted(by_step)], columns=COLUMNS)
    for column in COLUMNS[1:-1]:  # not measured -> NaN (None in JSON, "—" on screen)
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    frame["source"] = frame["source"].astype("category")
    return frame
