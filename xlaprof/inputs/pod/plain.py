"""A host's summary as plain data, for the answer a dask worker sends back: no pickle.

``distributed`` moves a task's result with pickle by default, and unpickling runs whatever code
the bytes name: a hostile (or compromised) worker would run its code in the xlaprof process.
So the task a worker runs for xlaprof (``summarize_capture_plain``) answers with bytes only, a
JSON document whose tables are Parquet (base64), and a failure is an answer too (its message),
never an exception object. The client reads answers with msgpack only
(``xlaprof.inputs.pod.cluster``), and ``decode`` takes the document apart checking every field's
type: an answer that is anything else is a ``ValueError`` (the caller's ``SchedulerError``).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from typing import TYPE_CHECKING, Any

from xlaprof.model.device import DeviceSummary
from xlaprof.model.pod import HostError, HostSummary
from xlaprof.model.stats import StepAggregates
from xlaprof.parse.units import loads as load_json

if TYPE_CHECKING:
    import pandas as pd

FORMAT = "xlaprof.host-summary/1"
# The most an answer may hold: a host's summary is small (its per-step tables stay on disk);
# one without a cache carries them, a few MB for a long capture.
MAX_ANSWER_BYTES = 512 * 1024**2
_DEVICE_TABLES = ("devices", "ops", "utilization", "bottleneck_by_device")
_OPTIONAL_TABLES = ("lines", "line_totals")


def summarize_capture_plain(
    path: str,
    first_step: int = 0,
    cache: bool = True,
    session: str = "",
    limit: int | None = None,
    cache_dir: str | None = None,
) -> bytes:
    """``summarize_capture`` on a worker (``limit``: the request's size cap, None for the
    default), its summary (or its failure) as plain bytes."""
    from xlaprof.errors import XlaprofError
    from xlaprof.inputs.pod.summary import summarize_capture

    try:
        summary = summarize_capture(path, first_step, cache, session, limit, cache_dir)
    except Exception as error:  # the host's failure travels as its message
        message = str(error) if isinstance(error, XlaprofError) else f"{path}: {error}"
        return _dumps({"format": FORMAT, "error": message})
    return encode(summary)


def encode(summary: HostSummary) -> bytes:
    """``summary`` as a JSON document with its tables as base64 Parquet."""
    model = summary.device
    device: dict[str, Any] | None = None
    if model is not None:
        device = {name: _table(getattr(model, name)) for name in _DEVICE_TABLES}
        device |= {name: _table(getattr(model, name)) for name in _OPTIONAL_TABLES}
        device |= {"events": model.events, "warnings": list(model.warnings)}
    record = {
        "format": FORMAT,
        "host": summary.host,
        "path": summary.path,
        "events": summary.events,
        "profile_start_ns": summary.profile_start_ns,
        "ops": _table(summary.ops),
        "device": device,
        "aggregates": None if summary.aggregates is None else summary.aggregates.to_json(),
        "tables": summary.tables,
        "frames": None
        if summary.frames is None
        else {name: _table(frame) for name, frame in summary.frames.items()},
        "cache": summary.cache,
        "cache_hit": summary.cache_hit,
        "seconds": summary.seconds,
        "worker": summary.worker,
        "worker_peak_rss_mb": summary.worker_peak_rss_mb,
        "notes": summary.notes,
    }
    return _dumps(record)


def decode(answer: object) -> HostSummary | HostError:
    """A worker's answer taken apart; ``ValueError`` (a few words on why) when it is not one
    that ``encode`` or ``summarize_capture_plain`` makes."""
    if not isinstance(answer, bytes | bytearray | memoryview):
        raise ValueError(f"an answer of type {type(answer).__name__}, not bytes")
    if len(answer) > MAX_ANSWER_BYTES:
        raise ValueError(f"an answer of {len(answer)} bytes (at most {MAX_ANSWER_BYTES})")
    try:
        record = load_json(bytes(answer))
    except (ValueError, RecursionError) as error:
        raise ValueError(f"not a JSON document ({type(error).__name__})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ValueError(f"not an {FORMAT} document")
    try:
        if "error" in record:
            return _error(record)
        return _summary(record)
    except (KeyError, TypeError, ValueError, binascii.Error, RecursionError) as error:
        raise ValueError(f"a damaged {FORMAT} document ({type(error).__name__}: {error})") from None


def _error(record: dict[str, Any]) -> HostError:
    from xlaprof.parse.events import host_from_filename

    message = _typed(record, "error", str)
    path = message.partition(": ")[0]
    return HostError(host=host_from_filename(path), path=path, message=message)


def _summary(record: dict[str, Any]) -> HostSummary:
    device = record.get("device")
    model = None
    if device is not None:
        if not isinstance(device, dict):
            raise TypeError("device is not an object")
        import pandas as pd

        empty = pd.DataFrame()  # the per-step rows stay in their files (as summarize_events)
        model = DeviceSummary(
            devices=_frame(device["devices"]),
            steps=empty,
            tracing=empty,
            bottleneck=empty,
            ops=_frame(device["ops"]),
            utilization=_frame(device["utilization"]),
            bottleneck_by_device=_optional_frame(device.get("bottleneck_by_device")),
            lines=_optional_frame(device.get("lines")),
            line_totals=_optional_frame(device.get("line_totals")),
            events=_typed(device, "events", int),
            warnings=_strings(device.get("warnings", [])),
        )
    aggregates = record.get("aggregates")
    frames = record.get("frames")
    if frames is not None and not isinstance(frames, dict):
        raise TypeError("frames is not an object")
    tables = record.get("tables") or {}
    if not isinstance(tables, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in tables.items()
    ):
        raise TypeError("tables is not an object of paths")
    start = record.get("profile_start_ns")
    if start is not None and not isinstance(start, int):
        raise TypeError("profile_start_ns is not an integer")
    cache = record.get("cache")
    if cache is not None and not isinstance(cache, str):
        raise TypeError("cache is not a path")
    return HostSummary(
        host=_typed(record, "host", str),
        path=_typed(record, "path", str),
        events=_typed(record, "events", int),
        profile_start_ns=start,
        ops=_frame(record["ops"]),
        device=model,
        aggregates=None if aggregates is None else StepAggregates.from_json(aggregates),
        tables=dict(tables),
        frames=None if frames is None else {str(k): _frame(v) for k, v in frames.items()},
        cache=cache,
        cache_hit=bool(record.get("cache_hit", False)),
        seconds=float(_typed(record, "seconds", int | float)),
        worker=_typed(record, "worker", str),
        worker_peak_rss_mb=float(_typed(record, "worker_peak_rss_mb", int | float)),
        notes=_strings(record.get("notes", [])),
    )


def _typed(record: dict[str, Any], key: str, kind: Any) -> Any:
    value = record[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise TypeError(f"{key} is a {type(value).__name__}")
    return value


def _strings(values: object) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise TypeError("a list of strings expected")
    return list(values)


def _dumps(record: dict[str, Any]) -> bytes:
    return json.dumps(record, allow_nan=True, separators=(",", ":")).encode()


def _table(frame: pd.DataFrame | None) -> str | None:
    """A table as base64 Parquet (dtypes, categoricals and nullable ints survive)."""
    if frame is None:
        return None
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer)
    return base64.b64encode(buffer.getvalue()).decode()


def _frame(text: object) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from xlaprof.inputs.pod.cache import frame_as_written

    if not isinstance(text, str):
        raise TypeError("a table is not a string")
    try:
        # the frame the worker sent, dtypes included (a table read from a cache is the same)
        return frame_as_written(pq.read_table(io.BytesIO(base64.b64decode(text, validate=True))))
    except (pa.ArrowException, OSError) as error:
        raise ValueError(f"a table is not Parquet ({error})") from None


def _optional_frame(text: object) -> pd.DataFrame | None:
    return None if text is None else _frame(text)
