"""XSpace (``*.xplane.pb``) and Chrome trace (``*.trace.json.gz``) files to pandas.

Neither XProf nor torch_xla ships Python classes for the XSpace schema, so the schema (public,
``tsl/profiler/protobuf/xplane.proto``) is built here at run time with ``google.protobuf``'s
descriptor API: parsing is then done by the protobuf runtime's C code, and only the per-event
loop is Python. Columns are gathered as plain lists and turned into numpy arrays and
categoricals once, which is what keeps a million events in seconds.

Result: one row per event, with ``host``, ``plane``, ``plane_kind`` (host/device/other),
``line``, ``name`` (categoricals), ``start_ns``/``end_ns`` (int64, absolute), ``duration_ns``
(float64), ``hlo_op``/``hlo_module``/``step_num`` (the stats tools ask for most), and ``args`` (a
dict of every stat, only on events that have stats, else None).
"""

from __future__ import annotations

import functools
import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = [
    "host",
    "plane",
    "plane_kind",
    "line",
    "name",
    "start_ns",
    "end_ns",
    "duration_ns",
    "hlo_op",
    "hlo_module",
    "step_num",
    "args",
]
_PROMOTED_STATS = ("hlo_op", "hlo_module", "step_num")


@functools.cache
def xspace_class() -> Any:
    """The ``XSpace`` message class, built from the public schema (field numbers included)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

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
    message(
        "XLine",
        [
            ("id", 1, field.TYPE_INT64),
            ("name", 2, field.TYPE_STRING),
            ("timestamp_ns", 3, field.TYPE_INT64),
            ("events", 4, field.TYPE_MESSAGE, repeated, "XEvent"),
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
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("xlaprof.xplane.XSpace"))


def read_xspace(path: Path) -> Any:
    space = xspace_class()()
    space.ParseFromString(Path(path).read_bytes())
    return space


def plane_kind(name: str) -> str:
    """``/host:CPU`` -> host, ``/device:TPU:0`` -> device, anything else -> other."""
    if name.startswith("/host:"):
        return "host"
    if name.startswith("/device:"):
        return "device"
    return "other"


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
class _Columns:
    """Column lists being gathered for one file."""

    plane: list[str]
    line: list[str]
    names: list[str]
    start: list[int]
    duration: list[int]
    args: list[dict[str, Any] | None]


def host_from_filename(path: Path) -> str:
    """``vm.xplane.pb`` -> ``vm``; ``localhost_9012.xplane.pb`` -> ``localhost:9012``."""
    stem = path.name.split(".xplane.pb")[0].split(".trace.json")[0]
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


def xspace_frame(path: Path, host: str | None = None) -> pd.DataFrame:
    """All timed events of one ``.xplane.pb`` as a DataFrame (see module docstring).

    ``frame.attrs["profile_start_ns"]`` holds when profiling began (None if not recorded).
    """
    space = read_xspace(path)
    columns = _Columns([], [], [], [], [], [])
    for plane in space.planes:
        if not plane.lines:
            continue
        event_names = {key: meta.name for key, meta in plane.event_metadata.items()}
        stat_names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        for line in plane.lines:
            count = len(line.events)
            if not count:
                continue
            base_ps = line.timestamp_ns * 1000
            line_name = line.display_name or line.name
            columns.plane.extend([plane.name] * count)
            columns.line.extend([line_name] * count)
            names, start, duration, args = (
                columns.names,
                columns.start,
                columns.duration,
                columns.args,
            )
            for event in line.events:
                names.append(event_names.get(event.metadata_id, ""))
                start.append(base_ps + event.offset_ps)
                duration.append(event.duration_ps)
                if event.stats:
                    args.append(
                        {
                            stat_names.get(s.metadata_id, "?"): _stat_value(s, stat_names)
                            for s in event.stats
                        }
                    )
                else:
                    args.append(None)
    frame = _frame(columns, host or host_from_filename(Path(path)))
    frame.attrs["profile_start_ns"] = profile_start_ns(space)
    return frame


def _frame(columns: _Columns, host: str) -> pd.DataFrame:
    import numpy as np
    import pandas as pd

    start_ps = np.asarray(columns.start, dtype=np.int64)
    duration_ps = np.asarray(columns.duration, dtype=np.int64)
    start_ns = start_ps // 1000
    frame = pd.DataFrame(
        {
            "host": pd.Categorical([host] * len(start_ns)),
            "plane": pd.Categorical(columns.plane),
            "plane_kind": pd.Categorical([plane_kind(p) for p in columns.plane]),
            "line": pd.Categorical(columns.line),
            "name": pd.Categorical(columns.names),
            "start_ns": start_ns,
            "end_ns": (start_ps + duration_ps) // 1000,
            "duration_ns": duration_ps / 1000.0,
        }
    )
    promoted = {key: [None] * len(start_ns) for key in _PROMOTED_STATS}
    for index, args in enumerate(columns.args):
        if args:
            for key in _PROMOTED_STATS:
                if key in args:
                    promoted[key][index] = args[key]
    frame["hlo_op"] = pd.Categorical(promoted["hlo_op"])
    frame["hlo_module"] = pd.Categorical(promoted["hlo_module"])
    frame["step_num"] = pd.array(
        [None if v is None else int(v) for v in promoted["step_num"]], dtype="Int64"
    )
    frame["args"] = columns.args
    return frame.sort_values("start_ns", kind="stable", ignore_index=True)


def chrome_trace_frame(path: Path, host: str | None = None) -> pd.DataFrame:
    """Complete (``ph: X``) events of a ``.trace.json.gz`` in the same columns."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as handle:
        document = json.load(handle)
    events = document.get("traceEvents", []) if isinstance(document, dict) else document
    processes: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for event in events:
        if event.get("ph") == "M":
            name = (event.get("args") or {}).get("name", "")
            if event.get("name") == "process_name":
                processes[event.get("pid")] = name
            elif event.get("name") == "thread_name":
                threads[(event.get("pid"), event.get("tid"))] = name
    columns = _Columns([], [], [], [], [], [])
    for event in events:
        if event.get("ph") != "X":
            continue
        pid, tid = event.get("pid"), event.get("tid")
        columns.plane.append(processes.get(pid, str(pid)))
        columns.line.append(threads.get((pid, tid), str(tid)))
        columns.names.append(event.get("name", ""))
        columns.start.append(int(float(event.get("ts", 0)) * 1e6))  # us -> ps
        columns.duration.append(int(float(event.get("dur", 0)) * 1e6))
        columns.args.append(event.get("args") or None)
    return _frame(columns, host or host_from_filename(Path(path)))
