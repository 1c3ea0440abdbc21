"""The event frame every capture reader produces: one row per timed event, one schema.

Both readers, ``xlaprof.parse.xplane`` (XSpace files) and ``xlaprof.parse.chrome_trace``
(Kineto and Chrome traces), return this frame, so everything after parsing reads one shape:
``host``, ``plane``, ``plane_kind`` (host/device/other), ``device`` (``TPU:0``, ``GPU:4``, ``CPU``
for the host), ``line``, ``name`` (categoricals), ``start_ns``/``end_ns`` (int64, absolute),
``duration_ns`` (float64), the stats tools ask for most (``hlo_op``, ``hlo_module``,
``step_num``, ``hlo_category``, ``program_id``, ``flops``, ``bytes_accessed``,
``device_offset_ps``/``device_duration_ps``: the op's time on the device clock, which XProf's
op statistics use), ``group_id`` (nullable Int64: XProf's step id, by which the device model
numbers ``Steps`` line events; like ``step_num``, a stat of the event itself), and ``args`` (a
dict of the event's own stats, only on events that have stats, else None; on an XSpace frame
the column is decoded on demand, ``xlaprof.parse.xplane.args``: it reads as an object column of
those dicts, each made when its row is first read, and ``stat_values`` reads one stat of every
row without making any). ``COLUMNS`` lists them in order.

Here are the schema, the naming of planes and devices, and ``EventColumns``, which builds the
frame from the Chrome-trace reader's arrays (the XSpace reader builds the same frame from its
own arrays in ``xlaprof.parse.xplane.frame``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = [
    "host",
    "plane",
    "plane_kind",
    "device",
    "line",
    "name",
    "start_ns",
    "end_ns",
    "duration_ns",
    "hlo_op",
    "hlo_module",
    "hlo_category",
    "program_id",
    "step_num",
    "flops",
    "bytes_accessed",
    "device_offset_ps",
    "device_duration_ps",
    "group_id",
    "args",
]
# Stats promoted to columns: categorical strings, an integer, and floats (NaN when absent).
TEXT_STATS = ("hlo_op", "hlo_module", "hlo_category", "program_id")
NUMBER_STATS = ("flops", "bytes_accessed", "device_offset_ps", "device_duration_ps")
# Stats of the event itself (never of its metadata) promoted to nullable integer columns.
WHOLE_STATS = ("step_num", "group_id")


def plane_kind(name: str) -> str:
    """``/host:CPU`` -> host, ``/device:TPU:0`` -> device, anything else -> other."""
    if name.startswith("/host:"):
        return "host"
    if name.startswith("/device:") and not name.startswith("/device:CUSTOM"):
        return "device"
    return "other"


def device_name(plane: str) -> str:
    """``/device:TPU:0`` -> ``TPU:0``; ``/host:CPU`` -> ``CPU``; ``GPU 3`` (Kineto) -> ``GPU:3``."""
    if plane.startswith("/device:"):
        return plane[len("/device:") :]
    if plane.startswith("/host:"):
        return plane[len("/host:") :]
    return plane


def device_kind(device: str) -> str:
    """``TPU:0`` -> TPU, ``GPU:4`` -> GPU, ``CPU`` -> CPU (the host, or a CPU PJRT device)."""
    head = device.split(":", 1)[0].split(" ", 1)[0].upper()
    return head if head in ("TPU", "GPU", "CPU") else "other"


@dataclass
class EventColumns:
    """One file's events as arrays (the Chrome-trace stream's): each event's start and
    duration (picoseconds after ``base_ns``), its (plane, line) as a code into ``planes`` and
    ``lines``, its name as a code into ``names``, its ``args`` (None: no stats), which rows'
    args hold a promoted stat (``promoted``), and which events to keep (``keep``: those whose
    times fit). ``frame`` makes the event frame of them, without a
    Python list per column: start and end must fit int64 picoseconds (a damaged or hostile
    capture holds a timestamp of 1e308 or 2^64; the caller counts what it drops)."""

    host: str
    base_ns: int
    start_ps: Any
    duration_ps: Any
    planes: list[str]
    lines: list[str]
    where: Any
    names: list[str]
    name: Any
    args: list[dict[str, Any] | None]
    promoted: list[int]
    keep: Any

    def frame(self) -> pd.DataFrame:
        """The event frame (``COLUMNS``), events in the (stable) order of their starts."""
        import numpy as np
        import pandas as pd

        kept = np.flatnonzero(self.keep)
        start_ps, duration_ps = self.start_ps[kept], self.duration_ps[kept]
        start_ns = self.base_ns + start_ps // 1000
        order = np.argsort(start_ns, kind="stable")  # as sort_values(kind="stable")
        rows = kept[order]
        start_ns, start_ps, duration_ps = start_ns[order], start_ps[order], duration_ps[order]
        where, name = self.where[rows], self.name[rows]
        planes = _categorical(self.planes, where)
        categories = [str(c) for c in planes.categories]
        kinds = [plane_kind(c) for c in categories]
        devices = [device_name(c) for c in categories]
        count = len(rows)
        frame = pd.DataFrame(
            {
                "host": _categorical([self.host], np.zeros(count, np.int64)),
                "plane": planes,
                "plane_kind": _categorical(kinds, planes.codes),
                "device": _categorical(devices, planes.codes),
                "line": _categorical(self.lines, where),
                "name": _categorical(self.names, name),
                "start_ns": start_ns,
                "end_ns": self.base_ns + (start_ps + duration_ps) // 1000,
                "duration_ns": duration_ps / 1000.0,
            }
        )
        position = np.full(len(self.keep), -1, np.int64)
        position[rows] = np.arange(count)
        found: list[tuple[int, dict[str, Any]]] = []  # (frame row, args) of kept events
        for row in self.promoted:
            at, args = int(position[row]), self.args[row]
            if at >= 0 and args:
                found.append((at, args))
        for key, column in _promoted_columns(found, count).items():
            frame[key] = column
        args_column = np.empty(count, dtype=object)
        args_column[:] = [self.args[row] for row in rows.tolist()]
        frame["args"] = pd.Series(args_column, index=frame.index, dtype=object)
        return frame


def _promoted_columns(found: list[tuple[int, dict[str, Any]]], count: int) -> dict[str, Any]:
    """The promoted stat columns of ``count`` rows, in frame order, from the args of the rows
    that hold one (``found``: frame row, args); the event's own stat, as in XProf."""
    import numpy as np
    import pandas as pd

    columns: dict[str, Any] = {}
    for key in TEXT_STATS:
        text: list[str | None] = [None] * count
        for at, args in found:
            if key in args:
                text[at] = None if args[key] is None else str(args[key])
        present = any(value is not None for value in text)
        columns[key] = pd.Categorical(text) if present else _categorical([], np.full(count, -1))
    for key in ("step_num", *NUMBER_STATS, "group_id"):
        if key in WHOLE_STATS:
            values, missing = np.zeros(count, np.int64), np.ones(count, bool)
            for at, args in found:
                if key in args and (number := step_number(args[key])) is not None:
                    values[at], missing[at] = number, False
            columns[key] = pd.arrays.IntegerArray(values, missing)
            continue
        numbers = np.full(count, np.nan)
        for at, args in found:
            if key in args:
                numbers[at] = finite(args[key])
        columns[key] = numbers
    return columns


def _categorical(texts: list[str], codes: Any) -> pd.Categorical[str]:
    """``pd.Categorical(texts[codes])`` (-1: missing) from codes: the categories used, sorted,
    without hashing a string per row."""
    import numpy as np
    import pandas as pd

    codes = np.asarray(codes, np.int64)
    used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(texts)))
    distinct = sorted({texts[code] for code in used.tolist()})
    position = {text: index for index, text in enumerate(distinct)}
    recode = np.array([position.get(text, -1) for text in texts] + [-1], np.int64)
    dtype: pd.CategoricalDtype[str] = pd.CategoricalDtype(distinct)
    return pd.Categorical.from_codes(recode[codes], dtype=dtype)


def host_from_filename(path: Path) -> str:
    """``vm.xplane.pb`` -> ``vm``; ``localhost_9012.xplane.pb`` -> ``localhost:9012``."""
    stem = path.name.split(".xplane.pb")[0].split(".pt.trace")[0].split(".trace.json")[0]
    head, sep, port = stem.rpartition("_")
    return f"{head}:{port}" if sep and port.isdigit() else stem


# -- names producers give lines and events ---------------------------------------------

# Lines a profiler derives from other lines: never compute (their events duplicate stream work).
DERIVED_LINES = frozenset(
    {
        "Steps",
        "XLA Modules",
        "XLA TraceMe",
        "Overlay",
        "Async XLA Ops",
        "TensorFlow Ops",
        "TensorFlow Name Scope",
        "Framework Ops",
        "Framework Name Scope",
        "Source code",
        "Launch Stats",
        "SparseCore Modules",
        "SparseCore Steps",
    }
)
# A device plane's own steps (TPU, and GPU where the profiler derived them), its program runs,
# and the TPU lines whose events are ops that count as busy.
STEPS_LINE = "Steps"
MODULES_LINE = "XLA Modules"
# One event per asynchronous start/done pair, spanning both (``hlo_op``: the done op).
ASYNC_OPS_LINE = "Async XLA Ops"
TPU_OP_LINES = frozenset({"XLA Ops", "SparseCore Ops"})
# torch_xla's host event at each torch_xla.sync(): it ends a step where no step markers are.
STEP_MARKER = "StepMarker"
# Host events only the lazy-tensor runtime (torch_xla) records. A host without any has no lazy
# tracing to measure (JAX, PyTorch eager): its host time is whatever the host did.
LAZY_TENSOR_EVENTS = (
    "StepMarker",
    "SyncTensorsGraph",
    "SyncTensorsGraphInternal",
    "XLAGraphExecutor::Compile",
    "ExtractIRAndPrepareXlaData_",
    "PjRtComputationClient::ExecuteComputation",
)
# Host events that span a compilation: the PJRT C API's compile call (JAX, any PJRT plugin),
# JAX's own span around it, torch_xla's compile. GPU work that starts inside one is the
# compiler's autotuning (candidate kernels timed, redzone checks), not the program's.
COMPILE_EVENTS = (
    "PJRT_Client_Compile",
    "backend_compile_and_load",
    "backend_compile",
    "XLAGraphExecutor::Compile",
)


# Times are int64 picoseconds after the capture's base: about 106 days either way.
INT64_MAX = 2**63 - 1


def step_number(value: Any) -> int | None:
    """A ``step_num`` stat as a step number, or None when it is not a whole number in range
    (a string, NaN, infinity or 2^64-1 from a damaged capture). ``value`` is whatever the capture
    held: a stat decoded from the wire or a JSON value."""
    try:
        number = int(value) if isinstance(value, int) else float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if isinstance(number, float):
        if not number.is_integer():
            return None
        number = int(number)
    return number if -INT64_MAX <= number <= INT64_MAX else None


def finite(value: Any) -> float:
    """A numeric stat (whatever the capture held) as a float; NaN where it is missing or not a
    number."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return float("nan")
    return number
