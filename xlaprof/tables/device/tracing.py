"""Host against device, per host step: lazy tracing (or, without torch_xla, the device's idle
time) against the busiest device's busy time.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from xlaprof.parse.events import LAZY_TENSOR_EVENTS
from xlaprof.tables import categorical as cols
from xlaprof.tables.device.events import device_events
from xlaprof.tables.device.steps import DeviceGroups, event_coverage, with_session
from xlaprof.tables.intervals import Coverage

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


# Host events of the lazy-tensor runtime that are not Python/tracing time within a host step.
HOST_RUNTIME_EVENTS = (
    "SyncTensorsGraphInternal",
    "XLAGraphExecutor::Compile",
    "TransferToDevice",
    "TransferFromDevice",
    "WaitDeviceOps",
    "PjRtComputationClient::ExecuteComputation",
    "ThunkExecutor::Execute",
)


# The lazy-tensor runtime's host work on the stepping thread: the graph build at the sync,
# host-to-device copies, handing the graph to the runtime. Matched as parts of the name
# (torch_xla 2.9 names its copies ``PjRtComputationClient::TransferToDevice``). Waits are not
# host work: ``WaitDeviceOps`` and the device-to-host copy (it waits for the graph to finish).
HOST_WORK_EVENTS = (
    "SyncTensorsGraphInternal",
    "TransferToDevice",
    "ExecuteComputation",
)
# Time on the stepping thread spent waiting on the device, and compiling. The sync's barrier
# waits for the previous execution's launch to be handed over, which blocks behind a full
# queue of executions (torch_xla's CPU client holds about 32): on a device-bound loop in steady
# state it holds nearly all of the sync's time (checked on torch_xla 2.9).
_HOST_NOT_WORK = (
    "WaitDeviceOps",
    "TransferFromDevice",
    "XLAGraphExecutor::Compile",
    "TensorCollectionBarrier",
)


# A step is called tracing-bound when host tracing takes at least this share of device busy.
TRACING_BOUND_RATIO = 1.0


# Without lazy-tensor events, a step is host-bound when the device idles in it at least this
# multiple of its busy time (idle >= busy: the device waits on the host half the step or more).
HOST_BOUND_RATIO = 1.0


TRACING_COLUMNS = [
    "session",
    "host",
    "step",
    "host_wall_s",
    "tracing_s",
    "host_busy_s",
    "device_busy_s",
    "ratio",
    "tracing_bound",
    "device_idle_s",
    "lazy_tensor",
    "bound",
]


def tracing_vs_device(
    events: pd.DataFrame,
    host_bounds: pd.DataFrame | None,
    frame: pd.DataFrame | None = None,
    groups: DeviceGroups | None = None,
    device_bounds: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per host step: what the host did against the device's busy time, and which bounds it.
    (``groups``: ``frame``'s devices' rows, where the caller has them; ``device_bounds``: where
    each step's device work lies where that is known to differ from the host's step, a run's
    executions: the device's busy time is read there.)

    Device busy is the busiest of the host's devices within the host step's window (union of
    its compute events); ``device_idle_s`` is the rest of the window. What the host figure is
    depends on what the capture recorded (``lazy_tensor``):

    - With lazy-tensor runtime events (torch_xla): tracing time is the step's wall time minus
      the runtime's own work on its main line (graph build at sync, compile, transfers,
      waiting on the device, execution): what is left is user Python and building the lazy
      IR, and whatever else the thread did or waited on that the trace does not show (a
      remainder, not a measurement). ``host_busy_s`` is what the trace does measure of the
      thread's own work: the runtime's host work on its main line (``HOST_WORK_EVENTS``: the
      graph build at the sync, which grows with the ops traced, host-to-device copies,
      dispatch), waits and compiles left out; a lower bound of the host's time. The step is
      tracing-bound (``bound`` "tracing") when that measured host work takes at least
      ``TRACING_BOUND_RATIO`` x the device's busy time, else "device"; ``ratio`` is
      host work / busy.
    - Without them (JAX, PyTorch eager): there is no lazy tracing to measure (``tracing_s``
      and ``tracing_bound`` are None). The device's idle time in the step is host time it
      waited through (Python, input batches, data loading, sleeps). The step is host-bound
      (``bound`` "host") when the device idles at least ``HOST_BOUND_RATIO`` x its busy time,
      else "device"; ``ratio`` is idle / busy.

    A device that idles the whole step is bound by the host when the host took any time.
    """
    import numpy as np
    import pandas as pd

    if host_bounds is None or host_bounds.empty:
        return pd.DataFrame(columns=TRACING_COLUMNS)
    events = with_session(events)
    frame = device_events(events) if frame is None else frame
    bounds = host_bounds if "session" in host_bounds.columns else with_session(host_bounds)
    columns: dict[str, list[Any]] = {name: [] for name in TRACING_COLUMNS}
    # masks and columns as arrays, once: no frame is copied per host
    host_plane = cols.equals(events["plane_kind"], "host")
    lazy_rows = np.flatnonzero(cols.member(events["name"], LAZY_TENSOR_EVENTS) & host_plane)
    groups = DeviceGroups.of(frame) if groups is None else groups
    starts, ends = bounds["start_ns"].to_numpy(), bounds["end_ns"].to_numpy()
    numbers = bounds["step"].to_numpy(dtype=np.int64)
    for (session, host), mine in cols.groups_of(bounds, ["session", "host"]):
        # the host's lazy-tensor events (few): read before any mask of every event is made
        lazy = bool(
            (
                cols.equals_at(events["session"], session, lazy_rows)
                & cols.equals_at(events["host"], host, lazy_rows)
            ).any()
        )
        a, b = starts[mine], ends[mine]
        # tracing and the host's measured work are read on lazy-tensor hosts only
        measured = None
        if lazy:
            rows = (
                cols.equals(events["session"], session)
                & cols.equals(events["host"], host)
                & host_plane
            )
            measured = _lazy_host_s(events, rows, a, b)
        devices = [
            key
            for key, _ in groups.groups
            if (str(key[0]), str(key[1])) == (str(session), str(host)) and len(groups.compute(key))
        ]
        da, db = _device_windows(device_bounds, host, numbers[mine], a, b)
        _host_rows(
            columns,
            (session, host, lazy),
            numbers[mine],
            (b - a) / 1e9,
            measured,
            _busy_s([groups.busy_in(key, da, db) for key in devices]),
        )
    return _table(columns)


def _device_windows(
    device_bounds: pd.DataFrame | None,
    host: object,
    steps: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Each step's device window: ``device_bounds``' for the host's steps it has, else the
    host's own window [a, b)."""
    import numpy as np

    if device_bounds is None or device_bounds.empty:
        return a, b
    mine = device_bounds[device_bounds["host"].astype(str) == str(host)]
    found = {
        int(step): (int(start), int(end))
        for step, start, end in zip(mine["step"], mine["start_ns"], mine["end_ns"], strict=True)
    }
    da = np.array([found.get(int(n), (x, y))[0] for n, x, y in zip(steps, a, b, strict=True)])
    db = np.array([found.get(int(n), (x, y))[1] for n, x, y in zip(steps, a, b, strict=True)])
    return da.astype(np.int64), db.astype(np.int64)


def _lazy_host_s(
    events: pd.DataFrame, on_host: np.ndarray, a: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A lazy-tensor host's tracing and measured host work per window [a, b) (seconds), read
    from its host-plane events (``on_host``, a mask of ``events``) through masks: a host's
    events are most of a capture's, and a copy of their rows (four columns) was a 1 GB
    host's analysis's high point."""
    main_line = cols.equals(events["line"], _main_line(events, on_host)) & on_host
    return _tracing_s(events, main_line, a, b), _host_busy_s(events, main_line, a, b)


def _host_rows(
    columns: dict[str, list[Any]],
    where: tuple[object, object, bool],
    steps: np.ndarray,
    walls: np.ndarray,
    host: tuple[np.ndarray, np.ndarray] | None,
    busy: np.ndarray | None,
) -> None:
    """One host's rows of ``tracing_vs_device`` appended to ``columns`` (a block per host and
    column: an array, or None for a block of None; ``session`` and ``host`` get the host's
    key and ``lazy_tensor`` its row count): per step, its wall, tracing and the host's
    measured work (lazy hosts: ``host`` holds both; None elsewhere), the busiest device's busy
    and idle time, the ratio and the bound (see ``tracing_vs_device``), column-wise."""
    import numpy as np

    session, host_name, lazy = where
    measured = lazy and host is not None
    columns["tracing_s"].append(host[0] if measured and host is not None else None)
    columns["host_busy_s"].append(host[1] if measured and host is not None else None)
    if busy is None:  # no compute events: nothing is known of the device
        for name in ("device_busy_s", "ratio", "tracing_bound", "device_idle_s", "bound"):
            columns[name].append(None)
    else:
        left = walls - busy
        idle = np.where(left < 0.0, 0.0, left)  # max(left, 0.0), NaN kept
        host_s = host[1] if measured and host is not None else idle
        idled = busy == 0  # the device idled all step: bound by the host if it worked
        limit = TRACING_BOUND_RATIO if lazy else HOST_BOUND_RATIO
        by_host = np.where(idled, host_s > 0, host_s >= limit * busy)
        labels = np.array(["device", "tracing" if lazy else "host"], dtype=object)
        bound = labels[by_host.astype(np.int8)]  # two strings, each row a reference to one
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = host_s / busy
        if idled.any():  # no ratio to an idle device: None
            ratio = ratio.astype(object)
            ratio[idled] = None
        columns["device_busy_s"].append(busy)
        columns["ratio"].append(ratio)
        columns["tracing_bound"].append(by_host if lazy else None)  # bound == "tracing"
        columns["device_idle_s"].append(idle)
        columns["bound"].append(bound)
    columns["session"].append(session)
    columns["host"].append(host_name)
    columns["step"].append(steps)
    columns["host_wall_s"].append(walls)
    columns["lazy_tensor"].append((lazy, len(steps)))


def _table(columns: dict[str, list[Any]]) -> pd.DataFrame:
    """The hosts' blocks (``_host_rows``) as one table, each column typed as pandas types the
    list of its values: a column of numbers or booleans only is joined as an array, one of None
    only is an object array of None, ``bound`` (text only) is typed from its distinct values;
    any other with None or text goes through a list, as it always did."""
    import numpy as np
    import pandas as pd

    counts = [count for _, count in columns["lazy_tensor"]]
    if not sum(counts):
        return pd.DataFrame({name: [] for name in TRACING_COLUMNS}, columns=TRACING_COLUMNS)
    data: dict[str, Any] = {
        "session": cols.repeated(columns["session"], counts),
        "host": cols.repeated(columns["host"], counts),
        "lazy_tensor": np.repeat([lazy for lazy, _ in columns["lazy_tensor"]], counts),
    }
    for name in TRACING_COLUMNS:
        if name in data:
            continue
        blocks = columns[name]
        if name == "bound" and all(b is not None for b in blocks):
            # text only ("tracing", "host", "device"): typed as its list, from its values
            codes, values = pd.factorize(np.concatenate(blocks))
            data[name] = cols.typed(values.tolist(), codes)
        elif all(b is None for b in blocks):  # not measured on any host: None throughout
            data[name] = np.full(sum(counts), None, dtype=object)
        elif any(b is None or b.dtype == object for b in blocks):
            listed: list[Any] = []
            for block, count in zip(blocks, counts, strict=True):
                listed += [None] * count if block is None else block.tolist()
            data[name] = listed
        else:
            data[name] = np.concatenate(blocks)
    return pd.DataFrame(data, columns=TRACING_COLUMNS)


def _tracing_s(
    events: pd.DataFrame, main_line: np.ndarray, a: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """Per window [a, b): its length less the lazy-tensor runtime's own work on the host's
    main line (``main_line``: a mask of ``events``), in seconds."""
    import numpy as np

    runtime = main_line & cols.contains(
        events["name"], "|".join(map(re.escape, HOST_RUNTIME_EVENTS))
    )
    within = event_coverage(events, runtime).within(a, b)
    covered: np.ndarray = np.maximum((b - a) - within, 0) / 1e9
    return covered


def _host_busy_s(
    events: pd.DataFrame, main_line: np.ndarray, a: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """Per window [a, b): the runtime's host work on the host's main line (``main_line``: a
    mask of ``events``), in seconds: the union of its ``HOST_WORK_EVENTS`` less the time they
    spend in waits or compiles within them."""
    import numpy as np

    name = events["name"]
    work = main_line & cols.contains(name, "|".join(map(re.escape, HOST_WORK_EVENTS)))
    waits = main_line & cols.contains(name, "|".join(map(re.escape, _HOST_NOT_WORK)))
    start, end = events["start_ns"].to_numpy(), events["end_ns"].to_numpy()
    wait_start, wait_end = start[waits], end[waits]
    both = Coverage.of(
        np.concatenate([start[work], wait_start]), np.concatenate([end[work], wait_end])
    ).within(a, b)
    busy: np.ndarray = (both - Coverage.of(wait_start, wait_end).within(a, b)) / 1e9
    return busy


def _busy_s(per_device: list[np.ndarray]) -> np.ndarray | None:
    """Per window: the busiest device's compute time in it (seconds); None without compute
    events. ``per_device``: each device's compute time in each window (ns)."""
    import numpy as np

    if not per_device:
        return None
    busiest: np.ndarray = np.max(per_device, axis=0) / 1e9
    return busiest


def has_lazy_tensor_runtime(host_events: pd.DataFrame) -> bool:
    """Whether a host's events hold the lazy-tensor runtime's own (``LAZY_TENSOR_EVENTS``)."""
    return bool(cols.member(host_events["name"], LAZY_TENSOR_EVENTS).any())


def _main_line(events: pd.DataFrame, on_host: np.ndarray) -> str | None:
    """The host line the lazy-tensor runtime traces on, among the events at ``on_host`` (a
    mask): the one with StepMarker/sync events."""
    import numpy as np

    marked = np.flatnonzero(
        cols.member(events["name"], ("StepMarker", "SyncTensorsGraphInternal")) & on_host
    )
    if len(marked):
        return str(events["line"].iloc[marked].astype(str).mode().iloc[0])
    on_python = cols.equals(events["line"], "python") & on_host
    return "python" if on_python.any() else None
