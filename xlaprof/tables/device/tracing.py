"""Host against device, per host step: lazy tracing (or, without torch_xla, the device's idle
time) against the busiest device's busy time.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from xlaprof.parse.events import LAZY_TENSOR_EVENTS
from xlaprof.tables import categorical as cols
from xlaprof.tables.device.events import device_events
from xlaprof.tables.device.steps import event_coverage, with_session

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
# Time on the stepping thread spent waiting on the device, and compiling.
_HOST_NOT_WORK = ("WaitDeviceOps", "TransferFromDevice", "XLAGraphExecutor::Compile")


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
) -> pd.DataFrame:
    """Per host step: what the host did against the device's busy time, and which bounds it.

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
    import pandas as pd

    if host_bounds is None or host_bounds.empty:
        return pd.DataFrame(columns=TRACING_COLUMNS)
    events = with_session(events)
    frame = device_events(events) if frame is None else frame
    bounds = host_bounds if "session" in host_bounds.columns else with_session(host_bounds)
    rows: list[dict[str, object]] = []
    for (session, host), mine in bounds.groupby(["session", "host"], observed=True):
        on_host = events[
            cols.equals(events["session"], session)
            & cols.equals(events["host"], host)
            & cols.equals(events["plane_kind"], "host")
        ]
        compute = frame[
            cols.equals(frame["session"], session)
            & cols.equals(frame["host"], host)
            & frame["compute"].to_numpy()
        ]
        lazy = has_lazy_tensor_runtime(on_host)
        a = mine["start_ns"].to_numpy()
        b = mine["end_ns"].to_numpy()
        tracing = _tracing_s(on_host, a, b)
        host_busy = _host_busy_s(on_host, a, b)
        busy = _busy_s(compute, a, b)
        for index, step in enumerate(mine["step"]):
            wall = (b[index] - a[index]) / 1e9
            device_busy = None if busy is None else float(busy[index])
            idle = None if device_busy is None else max(wall - device_busy, 0.0)
            host_s = float(host_busy[index]) if lazy else idle
            bound = _bound(host_s, device_busy, lazy)
            rows.append(
                {
                    "session": session,
                    "host": host,
                    "step": int(step),
                    "host_wall_s": wall,
                    "tracing_s": float(tracing[index]) if lazy else None,
                    "host_busy_s": float(host_busy[index]) if lazy else None,
                    "device_busy_s": device_busy,
                    "ratio": host_s / device_busy if device_busy and host_s is not None else None,
                    "tracing_bound": None if bound is None or not lazy else bound == "tracing",
                    "device_idle_s": idle,
                    "lazy_tensor": lazy,
                    "bound": bound,
                }
            )
    return pd.DataFrame(rows, columns=TRACING_COLUMNS)


def _tracing_s(on_host: pd.DataFrame, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per window [a, b): its length less the lazy-tensor runtime's own work on the host's
    main line (seconds)."""
    import numpy as np

    line = _main_line(on_host)
    runtime = on_host[
        cols.equals(on_host["line"], line)
        & cols.contains(on_host["name"], "|".join(map(re.escape, HOST_RUNTIME_EVENTS)))
    ]
    covered: np.ndarray = np.maximum((b - a) - event_coverage(runtime).within(a, b), 0) / 1e9
    return covered


def _host_busy_s(on_host: pd.DataFrame, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per window [a, b): the runtime's host work on the host's main line (seconds): the union
    of its ``HOST_WORK_EVENTS`` less the time they spend in waits or compiles within them."""
    import numpy as np

    from xlaprof.tables.intervals import Coverage

    line = on_host[cols.equals(on_host["line"], _main_line(on_host))]
    work = line[cols.contains(line["name"], "|".join(map(re.escape, HOST_WORK_EVENTS)))]
    waits = line[cols.contains(line["name"], "|".join(map(re.escape, _HOST_NOT_WORK)))]
    starts = np.concatenate([work["start_ns"].to_numpy(), waits["start_ns"].to_numpy()])
    ends = np.concatenate([work["end_ns"].to_numpy(), waits["end_ns"].to_numpy()])
    both = Coverage.of(starts, ends).within(a, b)
    busy: np.ndarray = (both - event_coverage(waits).within(a, b)) / 1e9
    return busy


def _busy_s(compute: pd.DataFrame, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """Per window [a, b): the busiest device's compute time in it (seconds); None without
    compute events."""
    import numpy as np

    per_device = [
        event_coverage(group).within(a, b) for _, group in compute.groupby("device", sort=True)
    ]
    if not per_device:
        return None
    busiest: np.ndarray = np.max(per_device, axis=0) / 1e9
    return busiest


def _bound(host_s: float | None, device_busy: float | None, lazy: bool) -> str | None:
    """What bounds a step: "tracing" (lazy) or "host" when the host's time is at least the
    ratio's share of the device's busy time, else "device"; None where either is unknown."""
    if device_busy is None or host_s is None:
        return None
    host_bound = "tracing" if lazy else "host"
    if device_busy == 0:  # the device idled all step: bound by the host if it worked
        return host_bound if host_s > 0 else "device"
    limit = TRACING_BOUND_RATIO if lazy else HOST_BOUND_RATIO
    return host_bound if host_s >= limit * device_busy else "device"


def has_lazy_tensor_runtime(host_events: pd.DataFrame) -> bool:
    """Whether a host's events hold the lazy-tensor runtime's own (``LAZY_TENSOR_EVENTS``)."""
    return bool(cols.member(host_events["name"], LAZY_TENSOR_EVENTS).any())


def _main_line(host_events: pd.DataFrame) -> str | None:
    """The host line the lazy-tensor runtime traces on: the one with StepMarker/sync events."""
    marked = host_events[
        cols.member(host_events["name"], ("StepMarker", "SyncTensorsGraphInternal"))
    ]
    if len(marked):
        return str(marked["line"].astype(str).mode().iloc[0])
    return "python" if cols.equals(host_events["line"], "python").any() else None
