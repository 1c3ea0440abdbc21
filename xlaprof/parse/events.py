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
dict of the event's own stats, only on events that have stats, else None). ``COLUMNS`` lists
them in order.

Here are the schema, the naming of planes and devices, and ``events_frame``, which builds the
frame from Python lists (the Chrome-trace reader's path; the XSpace reader builds the same frame
from numpy arrays in ``xlaprof.parse.xplane.frame``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
class Columns:
    """Column lists being gathered for one file (shared with the Chrome-trace reader).

    ``meta`` indexes ``meta_rows``: per event-metadata values (display name, metadata stats)
    are decoded once per metadata entry, then spread to events with one numpy ``take``.
    """

    plane: list[str] = field(default_factory=list)
    line: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    start: list[int] = field(default_factory=list)
    duration: list[int] = field(default_factory=list)
    args: list[dict[str, Any] | None] = field(default_factory=list)
    meta: list[int] = field(default_factory=list)
    meta_rows: list[dict[str, Any]] = field(default_factory=lambda: [{}])
    # Starts are picoseconds after base_ns: epoch nanoseconds times 1000 overflow int64.
    base_ns: int = 0
    dropped: int = 0  # events whose times did not fit int64 picoseconds


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


def _drop_out_of_range(columns: Columns) -> None:
    """Drop events whose start or end does not fit int64 picoseconds (a damaged or hostile
    capture: a timestamp of 1e308 or 2^64), counting them in ``columns.dropped``."""
    keep = [
        i
        for i, (start, duration) in enumerate(zip(columns.start, columns.duration, strict=True))
        if -INT64_MAX <= start <= INT64_MAX
        and 0 <= duration <= INT64_MAX
        and start + duration <= INT64_MAX
    ]
    if len(keep) == len(columns.start):
        return
    count = len(columns.start)
    columns.dropped += count - len(keep)
    for name in ("plane", "line", "names", "start", "duration", "args", "meta"):
        values = getattr(columns, name)
        if len(values) == count:
            setattr(columns, name, [values[i] for i in keep])


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


def events_frame(columns: Columns, host: str) -> pd.DataFrame:
    """The event DataFrame from gathered columns (start and duration in picoseconds): the
    Chrome-trace reader's; ``xspace_frame`` builds the same frame from decoded arrays."""
    import numpy as np
    import pandas as pd

    _drop_out_of_range(columns)
    start_ps = np.asarray(columns.start, dtype=np.int64)  # relative to columns.base_ns
    duration_ps = np.asarray(columns.duration, dtype=np.int64)
    start_ns = columns.base_ns + start_ps // 1000
    planes = pd.Categorical(columns.plane)
    categories = [str(c) for c in planes.categories]
    kinds = np.array([plane_kind(c) for c in categories] or [""], dtype=object)
    devices = np.array([device_name(c) for c in categories] or [""], dtype=object)
    frame = pd.DataFrame(
        {
            "host": pd.Categorical([host] * len(start_ns)),
            "plane": planes,
            "plane_kind": pd.Categorical(kinds[planes.codes]),
            "device": pd.Categorical(devices[planes.codes]),
            "line": pd.Categorical(columns.line),
            "name": pd.Categorical(columns.names),
            "start_ns": start_ns,
            "end_ns": columns.base_ns + (start_ps + duration_ps) // 1000,
            "duration_ns": duration_ps / 1000.0,
        }
    )
    # Promoted stats: decoded once per event metadata (meta_rows), spread to events with one
    # numpy take, then overridden by the event's own stats (an event's stat wins, as in XProf).
    count = len(start_ns)
    meta = np.asarray(columns.meta, dtype=np.int64) if columns.meta else np.zeros(0, np.int64)
    text: dict[str, np.ndarray] = {}
    for key in TEXT_STATS:
        table = [row.get(key) for row in columns.meta_rows]
        table_array = np.array([None if v is None else str(v) for v in table], dtype=object)
        text[key] = table_array[meta] if len(meta) == count else np.full(count, None, object)
    numbers: dict[str, np.ndarray] = {}
    for key in NUMBER_STATS:
        table = [row.get(key) for row in columns.meta_rows]
        table_array = np.array([finite(v) for v in table], np.float64)
        numbers[key] = table_array[meta] if len(meta) == count else np.full(count, np.nan)
    whole: dict[str, list[int | None]] = {key: [None] * count for key in WHOLE_STATS}
    promoted = {*TEXT_STATS, *NUMBER_STATS, *WHOLE_STATS}
    for index, args in enumerate(columns.args):
        if args:
            for key in promoted.intersection(args):
                value = args[key]
                if key in whole:
                    whole[key][index] = step_number(value)
                elif key in text:
                    text[key][index] = None if value is None else str(value)
                else:
                    numbers[key][index] = finite(value)
    for key in TEXT_STATS:
        frame[key] = pd.Categorical(text[key])
    frame["step_num"] = pd.array(whole["step_num"], dtype="Int64")
    for key in NUMBER_STATS:
        frame[key] = numbers[key]
    frame["group_id"] = pd.array(whole["group_id"], dtype="Int64")
    frame["args"] = pd.Series(columns.args, index=frame.index, dtype=object)
    frame = frame.sort_values("start_ns", kind="stable", ignore_index=True)
    frame.attrs["dropped_events"] = columns.dropped
    return frame
