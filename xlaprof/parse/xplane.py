"""XSpace (``*.xplane.pb``) files to pandas: one row per event, device planes included.

Neither XProf nor torch_xla ships Python classes for the XSpace schema, so the schema (public,
``tsl/profiler/protobuf/xplane.proto``) is built here at run time with ``google.protobuf``'s
descriptor API, and parsing is done by the protobuf runtime's C code (upb). No step is Python
per event: ``xspace_frame`` parses with a *shadow* schema in which ``XLine.events`` are bytes,
reads planes, lines and metadata (small) from upb's messages, decodes the events' own bytes
all at once with numpy (``xplane_wire``) and builds the frame from arrays (``xplane_frame``):
1.5 to 2 million events a second of CPU, where a Python loop over upb's messages managed about
0.3 million (``benchmarks/xplane_decode.py``).

Result: one row per event, with ``host``, ``plane``, ``plane_kind`` (host/device/other),
``device`` (``TPU:0``, ``GPU:4``, ``CPU`` for the host), ``line``, ``name`` (categoricals),
``start_ns``/``end_ns`` (int64, absolute), ``duration_ns`` (float64), the stats tools ask for
most (``hlo_op``, ``hlo_module``, ``step_num``, ``hlo_category``, ``program_id``, ``flops``,
``bytes_accessed``, ``device_offset_ps``/``device_duration_ps``: the op's time on the device
clock, which XProf's op statistics use), ``group_id`` (nullable Int64: XProf's step id, by
which the device model numbers ``Steps`` line events; like ``step_num``, a stat of the event
itself), and ``args`` (a dict of the event's own stats, only on events that have stats, else
None; ``xspace_frame(path, args=False)`` leaves it None everywhere). ``COLUMNS`` lists them in
order.

Where a stat lives differs by producer: on TPU ``XLA Ops`` lines the op is the event *name* (the
HLO text; the metadata's display name is the op name) and ``hlo_category``, ``program_id``,
``flops``, ``bytes_accessed`` are stats of the event *metadata*; GPU kernels carry ``hlo_op``
and ``hlo_module`` on the event itself. Both are read; an event's own stat wins, as in XProf.

Longer than the ~350 lines a module here aims for: the XSpace schema (both forms), the reading
of planes and metadata, and the frame builder the Chrome-trace reader shares (``Columns``,
``events_frame``) belong together; the event decoding and its frame are modules of their own.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.errors import BadCapture

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
_TEXT_STATS = ("hlo_op", "hlo_module", "hlo_category", "program_id")
_NUMBER_STATS = ("flops", "bytes_accessed", "device_offset_ps", "device_duration_ps")
# Stats of the event itself (never of its metadata) promoted to nullable integer columns.
_WHOLE_STATS = ("step_num", "group_id")
# Lines whose events are HLO ops: there the metadata's display name is the op's name.
OP_LINES = ("XLA Ops", "Async XLA Ops", "SparseCore Ops")
# Plane stats that describe the device (TPU planes; GPU planes carry vendor, name, bandwidth).
_PLANE_STATS = {
    "device_type_string": "type",
    "gpu_device_name": "type",  # GPU planes (XLA's CUPTI/ROCm tracers): "NVIDIA H100 80GB HBM3"
    "device_vendor": "vendor",
    "peak_teraflops_per_second": "peak_tflops",
    "peak_hbm_bw_gigabytes_per_second": "peak_hbm_gbps",
    "memory_bandwidth": "memory_bandwidth_bytes_per_s",
}


def xspace_class() -> Any:
    """The ``XSpace`` message class, built from the public schema (field numbers included)."""
    return _message_class("XSpace", events_as_bytes=False)


@functools.cache
def _message_class(name: str, events_as_bytes: bool) -> Any:
    """A message class of the schema; with ``events_as_bytes``, of the *shadow* schema in which
    ``XLine.events`` is ``repeated bytes`` (the same wire format), so that upb hands over each
    event's bytes for ``xplane_wire`` to decode instead of building a message per event."""
    from google.protobuf import message_factory

    pool = _schema_pool(events_as_bytes)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"xlaprof.xplane.{name}"))


@functools.cache
def _schema_pool(events_as_bytes: bool) -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool

    field = descriptor_pb2.FieldDescriptorProto
    optional, repeated = field.LABEL_OPTIONAL, field.LABEL_REPEATED
    proto = descriptor_pb2.FileDescriptorProto(
        name="xlaprof_xplane.proto", package="xlaprof.xplane", syntax="proto3"
    )

    def message(name: str, fields: list[tuple], oneof: str | None = None) -> Any:
        described = proto.message_type.add(name=name)
        if oneof:
            described.oneof_decl.add(name=oneof)
        for spec in fields:
            fname, number, ftype, label, type_name, in_oneof = (*spec, None, None, None)[:6]
            added = described.field.add(
                name=fname, number=number, type=ftype, label=label or optional
            )
            if type_name:
                added.type_name = f".xlaprof.xplane.{type_name}"
            if in_oneof:
                added.oneof_index = 0
        return described

    message(
        "XStatMetadata",
        [
            ("id", 1, field.TYPE_INT64),
            ("name", 2, field.TYPE_STRING),
            ("description", 3, field.TYPE_STRING),
        ],
    )
    message(
        "XStat",
        [
            ("metadata_id", 1, field.TYPE_INT64),
            ("double_value", 2, field.TYPE_DOUBLE, None, None, True),
            ("uint64_value", 3, field.TYPE_UINT64, None, None, True),
            ("int64_value", 4, field.TYPE_INT64, None, None, True),
            ("str_value", 5, field.TYPE_STRING, None, None, True),
            ("bytes_value", 6, field.TYPE_BYTES, None, None, True),
            ("ref_value", 7, field.TYPE_UINT64, None, None, True),
        ],
        oneof="value",
    )
    message(
        "XEventMetadata",
        [
            ("id", 1, field.TYPE_INT64),
            ("name", 2, field.TYPE_STRING),
            ("metadata", 3, field.TYPE_BYTES),
            ("display_name", 4, field.TYPE_STRING),
            ("stats", 5, field.TYPE_MESSAGE, repeated, "XStat"),
            ("child_id", 6, field.TYPE_INT64, repeated),
        ],
    )
    message(
        "XEvent",
        [
            ("metadata_id", 1, field.TYPE_INT64),
            ("offset_ps", 2, field.TYPE_INT64, None, None, True),
            ("num_occurrences", 5, field.TYPE_INT64, None, None, True),
            ("duration_ps", 3, field.TYPE_INT64),
            ("stats", 4, field.TYPE_MESSAGE, repeated, "XStat"),
        ],
        oneof="data",
    )
    event_type = (
        (field.TYPE_BYTES, repeated)
        if events_as_bytes
        else (field.TYPE_MESSAGE, repeated, "XEvent")
    )
    message(
        "XLine",
        [
            ("id", 1, field.TYPE_INT64),
            ("name", 2, field.TYPE_STRING),
            ("timestamp_ns", 3, field.TYPE_INT64),
            ("events", 4, *event_type),
            ("duration_ps", 9, field.TYPE_INT64),
            ("display_id", 10, field.TYPE_INT64),
            ("display_name", 11, field.TYPE_STRING),
        ],
    )
    plane = message(
        "XPlane",
        [
            ("id", 1, field.TYPE_INT64),
            ("name", 2, field.TYPE_STRING),
            ("lines", 3, field.TYPE_MESSAGE, repeated, "XLine"),
            ("event_metadata", 4, field.TYPE_MESSAGE, repeated, "XPlane.EventMetadataEntry"),
            ("stat_metadata", 5, field.TYPE_MESSAGE, repeated, "XPlane.StatMetadataEntry"),
            ("stats", 6, field.TYPE_MESSAGE, repeated, "XStat"),
        ],
    )
    for entry_name, value_type in (
        ("EventMetadataEntry", "XEventMetadata"),
        ("StatMetadataEntry", "XStatMetadata"),
    ):
        entry = plane.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=field.TYPE_INT64, label=optional)
        entry.field.add(
            name="value",
            number=2,
            type=field.TYPE_MESSAGE,
            label=optional,
            type_name=f".xlaprof.xplane.{value_type}",
        )
    message(
        "XSpace",
        [
            ("planes", 1, field.TYPE_MESSAGE, repeated, "XPlane"),
            ("errors", 2, field.TYPE_STRING, repeated),
            ("warnings", 3, field.TYPE_STRING, repeated),
            ("hostnames", 4, field.TYPE_STRING, repeated),
        ],
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return pool


def read_xspace(path: Path) -> Any:
    """Parse one ``.xplane.pb``; bytes that do not decode raise ``BadCapture`` naming the file.

    An empty file decodes as an empty XSpace (a capture with no events): callers decide.
    """
    path = Path(path)
    return _parse(path, read_capture(path), xspace_class())


def read_capture(path: Path) -> bytes:
    """The bytes of a ``.xplane.pb``: a regular file (no FIFO or device) under the size cap
    (``--max-size``, else protobuf's own 2 GiB), checked before a byte is read."""
    from xlaprof.errors import InputTooLarge, InputUnreadable
    from xlaprof.safeio import DEFAULT_XPLANE_LIMIT, TooLarge, UnsafeFile, input_limit, read_capped

    try:
        return read_capped(path, input_limit(DEFAULT_XPLANE_LIMIT))
    except TooLarge as error:
        raise InputTooLarge(f"{error}; pass --max-size to read it anyway") from None
    except UnsafeFile as error:
        raise InputUnreadable(str(error)) from None


def _parse(path: Path, data: bytes, space_class: Any) -> Any:
    from google.protobuf.message import DecodeError

    space = space_class()
    try:
        space.ParseFromString(data)
    except DecodeError:
        raise _undecodable(path, data) from None
    return space


def _undecodable(path: Path, data: bytes) -> BadCapture:
    why = _why_undecodable(data)
    return BadCapture(
        f"{path}: {why} xplane capture ({len(data)} bytes that do not decode as an XSpace)"
    )


def _why_undecodable(data: bytes) -> str:
    """ "truncated" when XSpace's top-level fields run past the end of the file, else "corrupt".

    Every top-level XSpace field (planes, errors, warnings, hostnames) is length-delimited, so
    the outer layer can be walked without decoding: a cut-off file is one whose last field
    claims more bytes than are left.
    """
    position = 0

    def varint() -> int | None:
        nonlocal position
        value = shift = 0
        while position < len(data):
            byte = data[position]
            position += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        return None

    while position < len(data):
        tag = varint()
        if tag is None:
            return "truncated"
        if tag & 7 != 2 or not 1 <= tag >> 3 <= 4:
            return "corrupt"
        length = varint()
        if length is None or position + length > len(data):
            return "truncated"
        position += length
    return "corrupt"


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


def _stat_value(stat: Any, stat_names: dict[int, str]) -> Any:
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(stat, kind)
    if kind == "ref_value":
        return stat_names.get(value, value)
    if kind == "bytes_value":
        return value.hex()
    return value


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


_ABSOLUTE_NS = 10**15  # line timestamps above this are since the epoch, below it relative


def profile_start_ns(space: Any) -> int | None:
    """When profiling started, in the events' time base (the "Task Environment" plane).

    CPU captures time lines from the session start (small timestamps: the start is 0); TPU
    captures use epoch nanoseconds, like ``profile_start_time``.
    """
    start = None
    absolute = False
    for plane in space.planes:
        absolute = absolute or any(line.timestamp_ns > _ABSOLUTE_NS for line in plane.lines)
        names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        for stat in plane.stats:
            if names.get(stat.metadata_id) == "profile_start_time":
                start = stat.uint64_value or stat.int64_value
    if start is None:
        return None
    return start if absolute else 0


def plane_info(plane: Any) -> dict[str, Any]:
    """What a device plane says about its device: type, vendor, peak FLOP/s and bytes/s."""
    names = {key: meta.name for key, meta in plane.stat_metadata.items()}
    info: dict[str, Any] = {"plane": plane.name, "device": device_name(plane.name)}
    info["kind"] = device_kind(info["device"])
    for stat in plane.stats:
        key = _PLANE_STATS.get(names.get(stat.metadata_id, ""))
        if key:
            info[key] = _stat_value(stat, names)
    peak_tflops = info.pop("peak_tflops", None)
    peak_hbm = info.pop("peak_hbm_gbps", None)
    bandwidth = info.pop("memory_bandwidth_bytes_per_s", None)
    info["peak_flops_per_s"] = float(peak_tflops) * 1e12 if peak_tflops else None
    if peak_hbm:
        info["peak_bytes_per_s"] = float(peak_hbm) * 1e9
    else:
        info["peak_bytes_per_s"] = float(bandwidth) if bandwidth else None
    return info


def hostname(space: Any, path: Path) -> str:
    """The host a capture came from: ``XSpace.hostnames`` when set, else the file's name."""
    names = [name for name in space.hostnames if name]
    return names[0] if names else host_from_filename(Path(path))


def xspace_frame(path: Path, host: str | None = None, args: bool = True) -> pd.DataFrame:
    """All timed events of one ``.xplane.pb`` as a DataFrame (see module docstring).

    ``frame.attrs`` holds ``profile_start_ns`` (when profiling began, None if not recorded),
    ``devices`` (one ``plane_info`` dict per device plane that has events) and
    ``dropped_events``. With ``args=False`` the ``args`` column is None on every row and no
    per-event dict is built (for callers that keep every column but ``args``, like the pod
    cache): what the analysis reads from ``args`` on an XSpace (``group_id``) is a column.
    """
    from xlaprof.parse.xplane_frame import Layout
    from xlaprof.parse.xplane_wire import WireError, decode_events, split_space

    path = Path(path)
    raw = read_capture(path)
    space = _parse(path, raw, _message_class("XSpace", events_as_bytes=True))
    if not space.planes:
        size = path.stat().st_size
        what = "empty file" if size == 0 else f"{size} bytes with no profiler planes"
        raise BadCapture(f"{path}: {what}, not an xplane capture")
    planes = [plane for plane in space.planes if any(line.events for line in plane.lines)]
    layout = Layout(planes)
    devices = [plane_info(plane) for plane in planes if plane_kind(plane.name) == "device"]
    start_ns = profile_start_ns(space)
    host = host or hostname(space, path)
    data, starts, ends = split_space(space)  # empties the space of all but events: read by now
    del space, planes
    try:
        events = decode_events(data, starts, ends, _canonical_event)
    except WireError:
        raise _undecodable(path, raw) from None
    del data, starts, ends
    frame = layout.frame(events, host, args)
    frame.attrs["profile_start_ns"] = start_ns
    frame.attrs["devices"] = devices
    return frame


def _canonical_event(raw: bytes) -> bytes:
    """One event's bytes as upb reads and re-encodes them (for ``xplane_wire``, on events its
    rounds do not decode); ``WireError`` where upb rejects them, as it would the file."""
    from google.protobuf.message import DecodeError

    from xlaprof.parse.xplane_wire import WireError

    event = _message_class("XEvent", events_as_bytes=False)()
    try:
        event.ParseFromString(raw)
    except DecodeError as error:
        raise WireError(str(error)) from None
    event.DiscardUnknownFields()
    return event.SerializeToString()


# Times are int64 picoseconds after the capture's base: about 106 days either way.
_INT64_MAX = 2**63 - 1


def _drop_out_of_range(columns: Columns) -> None:
    """Drop events whose start or end does not fit int64 picoseconds (a damaged or hostile
    capture: a timestamp of 1e308 or 2^64), counting them in ``columns.dropped``."""
    keep = [
        i
        for i, (start, duration) in enumerate(zip(columns.start, columns.duration, strict=True))
        if -_INT64_MAX <= start <= _INT64_MAX
        and 0 <= duration <= _INT64_MAX
        and start + duration <= _INT64_MAX
    ]
    if len(keep) == len(columns.start):
        return
    count = len(columns.start)
    columns.dropped += count - len(keep)
    for name in ("plane", "line", "names", "start", "duration", "args", "meta"):
        values = getattr(columns, name)
        if len(values) == count:
            setattr(columns, name, [values[i] for i in keep])


def _step_number(value: object) -> int | None:
    """A ``step_num`` stat as a step number, or None when it is not a whole number in range
    (a string, NaN, infinity or 2^64-1 from a damaged capture)."""
    try:
        number = int(value) if isinstance(value, int) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    if isinstance(number, float):
        if not number.is_integer():
            return None
        number = int(number)
    return number if -_INT64_MAX <= number <= _INT64_MAX else None


def _finite(value: object) -> float:
    """A numeric stat as a float; NaN where it is missing or not a number."""
    try:
        number = float(value)  # type: ignore[arg-type]
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
    for key in _TEXT_STATS:
        table = [row.get(key) for row in columns.meta_rows]
        table_array = np.array([None if v is None else str(v) for v in table], dtype=object)
        text[key] = table_array[meta] if len(meta) == count else np.full(count, None, object)
    numbers: dict[str, np.ndarray] = {}
    for key in _NUMBER_STATS:
        table = [row.get(key) for row in columns.meta_rows]
        table_array = np.array([_finite(v) for v in table], np.float64)
        numbers[key] = table_array[meta] if len(meta) == count else np.full(count, np.nan)
    whole: dict[str, list[int | None]] = {key: [None] * count for key in _WHOLE_STATS}
    promoted = {*_TEXT_STATS, *_NUMBER_STATS, *_WHOLE_STATS}
    for index, args in enumerate(columns.args):
        if args:
            for key in promoted.intersection(args):
                value = args[key]
                if key in whole:
                    whole[key][index] = _step_number(value)
                elif key in text:
                    text[key][index] = None if value is None else str(value)
                else:
                    numbers[key][index] = _finite(value)
    for key in _TEXT_STATS:
        frame[key] = pd.Categorical(text[key])
    frame["step_num"] = pd.array(whole["step_num"], dtype="Int64")
    for key in _NUMBER_STATS:
        frame[key] = numbers[key]
    frame["group_id"] = pd.array(whole["group_id"], dtype="Int64")
    frame["args"] = columns.args
    frame = frame.sort_values("start_ns", kind="stable", ignore_index=True)
    frame.attrs["dropped_events"] = columns.dropped
    return frame
