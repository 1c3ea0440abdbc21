"""The XSpace schema (``*.xplane.pb``), built at run time, and what planes say about devices.

Neither XProf nor torch_xla ships Python classes for the XSpace schema, so the schema (public,
``tsl/profiler/protobuf/xplane.proto``) is built here with ``google.protobuf``'s descriptor API,
and parsing is done by the protobuf runtime's C code (upb). Two forms exist: the schema itself
(``xspace_class``), and a *shadow* in which ``XLine.events`` are bytes, so that upb hands over
each event's bytes for ``xlaprof.parse.xplane.wire`` to decode with numpy instead of building a
message per event (``message_class(name, events_as_bytes=True)``).

Where a stat lives differs by producer: on TPU ``XLA Ops`` lines the op is the event *name* (the
HLO text; the metadata's display name is the op name) and ``hlo_category``, ``program_id``,
``flops``, ``bytes_accessed`` are stats of the event *metadata*; GPU kernels carry ``hlo_op``
and ``hlo_module`` on the event itself. Both are read; an event's own stat wins, as in XProf.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from xlaprof.errors import BadCapture
from xlaprof.parse.events import device_kind, device_name, host_from_filename

if TYPE_CHECKING:
    from google.protobuf.descriptor_pb2 import DescriptorProto
    from google.protobuf.descriptor_pool import DescriptorPool

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
    return message_class("XSpace", events_as_bytes=False)


@functools.cache
def message_class(name: str, events_as_bytes: bool) -> Any:
    """A message class of the schema; with ``events_as_bytes``, of the *shadow* schema in which
    ``XLine.events`` is ``repeated bytes`` (the same wire format), so that upb hands over each
    event's bytes for ``wire`` to decode instead of building a message per event."""
    from google.protobuf import message_factory

    pool = _schema_pool(events_as_bytes)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))


class _Field(NamedTuple):
    """One field of a message, as ``xplane.proto`` declares it."""

    name: str
    number: int
    type: str  # a ``FieldDescriptorProto.TYPE_*`` name without its prefix: "INT64", "MESSAGE"…
    message: str | None = None  # the message type of a MESSAGE field
    repeated: bool = False
    in_oneof: bool = False  # a member of its message's oneof (a message here has at most one)
    map_to: str | None = None  # a ``map<int64, map_to>`` field


# The messages of the public schema, in its order: each with its oneof's name (or None) and its
# fields.
_SCHEMA: dict[str, tuple[str | None, tuple[_Field, ...]]] = {
    "XStatMetadata": (
        None,
        (
            _Field("id", 1, "INT64"),
            _Field("name", 2, "STRING"),
            _Field("description", 3, "STRING"),
        ),
    ),
    "XStat": (
        "value",
        (
            _Field("metadata_id", 1, "INT64"),
            _Field("double_value", 2, "DOUBLE", in_oneof=True),
            _Field("uint64_value", 3, "UINT64", in_oneof=True),
            _Field("int64_value", 4, "INT64", in_oneof=True),
            _Field("str_value", 5, "STRING", in_oneof=True),
            _Field("bytes_value", 6, "BYTES", in_oneof=True),
            _Field("ref_value", 7, "UINT64", in_oneof=True),
        ),
    ),
    "XEventMetadata": (
        None,
        (
            _Field("id", 1, "INT64"),
            _Field("name", 2, "STRING"),
            _Field("metadata", 3, "BYTES"),
            _Field("display_name", 4, "STRING"),
            _Field("stats", 5, "MESSAGE", "XStat", repeated=True),
            _Field("child_id", 6, "INT64", repeated=True),
        ),
    ),
    "XEvent": (
        "data",
        (
            _Field("metadata_id", 1, "INT64"),
            _Field("offset_ps", 2, "INT64", in_oneof=True),
            _Field("num_occurrences", 5, "INT64", in_oneof=True),
            _Field("duration_ps", 3, "INT64"),
            _Field("stats", 4, "MESSAGE", "XStat", repeated=True),
        ),
    ),
    "XLine": (
        None,
        (
            _Field("id", 1, "INT64"),
            _Field("name", 2, "STRING"),
            _Field("timestamp_ns", 3, "INT64"),
            _Field("events", 4, "MESSAGE", "XEvent", repeated=True),  # bytes in the shadow
            _Field("duration_ps", 9, "INT64"),
            _Field("display_id", 10, "INT64"),
            _Field("display_name", 11, "STRING"),
        ),
    ),
    "XPlane": (
        None,
        (
            _Field("id", 1, "INT64"),
            _Field("name", 2, "STRING"),
            _Field("lines", 3, "MESSAGE", "XLine", repeated=True),
            _Field("event_metadata", 4, "MESSAGE", map_to="XEventMetadata"),
            _Field("stat_metadata", 5, "MESSAGE", map_to="XStatMetadata"),
            _Field("stats", 6, "MESSAGE", "XStat", repeated=True),
        ),
    ),
    "XSpace": (
        None,
        (
            _Field("planes", 1, "MESSAGE", "XPlane", repeated=True),
            _Field("errors", 2, "STRING", repeated=True),
            _Field("warnings", 3, "STRING", repeated=True),
            _Field("hostnames", 4, "STRING", repeated=True),
        ),
    ),
}
_PACKAGE = "xlaprof.xplane"


@functools.cache
def _schema_pool(events_as_bytes: bool) -> DescriptorPool:
    """The schema (``_SCHEMA``) as a descriptor pool; with ``events_as_bytes``, the shadow."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    proto = descriptor_pb2.FileDescriptorProto(
        name="xlaprof_xplane.proto", package=_PACKAGE, syntax="proto3"
    )
    for name, (oneof, fields) in _SCHEMA.items():
        described = proto.message_type.add(name=name)
        if oneof:
            described.oneof_decl.add(name=oneof)
        for spec in fields:
            if events_as_bytes and (name, spec.name) == ("XLine", "events"):
                spec = spec._replace(type="BYTES", message=None)
            _add_field(described, spec)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return pool


def _add_field(described: DescriptorProto, spec: _Field) -> None:
    """One field on a message's descriptor; a map field as protoc declares one: repeated
    entries of a nested ``<Name>Entry`` message with a key and a value."""
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto as Field

    repeated = spec.repeated or spec.map_to is not None
    message = spec.message
    if spec.map_to is not None:
        entry_name = "".join(part.capitalize() for part in spec.name.split("_")) + "Entry"
        entry = described.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=Field.TYPE_INT64, label=Field.LABEL_OPTIONAL)
        entry.field.add(
            name="value",
            number=2,
            type=Field.TYPE_MESSAGE,
            label=Field.LABEL_OPTIONAL,
            type_name=f".{_PACKAGE}.{spec.map_to}",
        )
        message = f"{described.name}.{entry_name}"
    added = described.field.add(
        name=spec.name,
        number=spec.number,
        type=Field.Type.Value(f"TYPE_{spec.type}"),
        label=Field.LABEL_REPEATED if repeated else Field.LABEL_OPTIONAL,
    )
    if message:
        added.type_name = f".{_PACKAGE}.{message}"
    if spec.in_oneof:
        added.oneof_index = 0


def read_xspace(path: Path, limit: int | None = None) -> Any:
    """Parse one ``.xplane.pb``; bytes that do not decode raise ``BadCapture`` naming the file.

    An empty file decodes as an empty XSpace (a capture with no events): callers decide.
    """
    path = Path(path)
    return parse_space(path, read_capture(path, limit), xspace_class())


def read_capture(path: Path, limit: int | None = None, mapped: bool = False) -> Any:
    """The bytes of a ``.xplane.pb``: a regular file (no FIFO or device) under the size cap
    (``limit``: ``--max-size``, else protobuf's own 2 GiB), checked before a byte is read.
    ``mapped``: in an anonymous map where it can (``safeio.read_capped_mapped``: memory the
    decoder gives back as it goes), else ``bytes``."""
    from xlaprof.errors import InputTooLarge, InputUnreadable
    from xlaprof.safeio import (
        DEFAULT_XPLANE_LIMIT,
        TooLarge,
        UnsafeFile,
        read_capped,
        read_capped_mapped,
    )

    cap = DEFAULT_XPLANE_LIMIT if limit is None else limit
    try:
        return read_capped_mapped(path, cap) if mapped else read_capped(path, cap)
    except TooLarge as error:
        raise InputTooLarge(f"{error}; pass --max-size to read it anyway") from None
    except UnsafeFile as error:
        raise InputUnreadable(str(error)) from None


def parse_space(path: Path, data: bytes, space_class: Any) -> Any:
    from google.protobuf.message import DecodeError

    space = space_class()
    try:
        space.ParseFromString(data)
    except DecodeError:
        raise undecodable(path, data) from None
    return space


def undecodable(path: Path, data: bytes) -> BadCapture:
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
    from xlaprof.parse.xplane.wire import Truncated, read_varint

    position = 0
    while position < len(data):
        try:
            tag, position = read_varint(data, position)
            if tag & 7 != 2 or not 1 <= tag >> 3 <= 4:
                return "corrupt"
            length, position = read_varint(data, position)
        except Truncated:
            return "truncated"
        except ValueError:  # a varint over 10 bytes
            return "corrupt"
        if position + length > len(data):
            return "truncated"
        position += length
    return "corrupt"


def stat_value(stat: Any, stat_names: dict[int, str]) -> Any:
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(stat, kind)
    if kind == "ref_value":
        return stat_names.get(value, value)
    if kind == "bytes_value":
        return value.hex()
    return value


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


def epoch_offset_ns(space: Any) -> int | None:
    """What to add to the events' times for epoch nanoseconds: 0 where lines are timed from
    the epoch (TPU captures), ``profile_start_time`` where they are timed from the session's
    start (CPU captures), None where neither is known. Other logs' wall-clock times (a
    TORCH_TRACE compile) are placed on the capture's clock with it."""
    if any(line.timestamp_ns > _ABSOLUTE_NS for plane in space.planes for line in plane.lines):
        return 0
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        for stat in plane.stats:
            if names.get(stat.metadata_id) == "profile_start_time":
                start = stat.uint64_value or stat.int64_value
                return int(start) if start > _ABSOLUTE_NS else None
    return None


def plane_info(plane: Any) -> dict[str, Any]:
    """What a device plane says about its device: type, vendor, peak FLOP/s and bytes/s."""
    names = {key: meta.name for key, meta in plane.stat_metadata.items()}
    info: dict[str, Any] = {"plane": plane.name, "device": device_name(plane.name)}
    info["kind"] = device_kind(info["device"])
    for stat in plane.stats:
        key = _PLANE_STATS.get(names.get(stat.metadata_id, ""))
        if key:
            info[key] = stat_value(stat, names)
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


def canonical_event(raw: bytes) -> bytes:
    """One event's bytes as upb reads and re-encodes them (for ``wire``, on events its
    rounds do not decode); ``WireError`` where upb rejects them, as it would the file."""
    from google.protobuf.message import DecodeError

    from xlaprof.parse.xplane.wire import WireError

    event = message_class("XEvent", events_as_bytes=False)()
    try:
        event.ParseFromString(raw)
    except DecodeError as error:
        raise WireError(str(error)) from None
    event.DiscardUnknownFields()
    encoded: bytes = event.SerializeToString()
    return encoded
