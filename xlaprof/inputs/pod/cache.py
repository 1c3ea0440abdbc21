"""The per-host Parquet cache: a host's events and its summary, written once, reused.

Each host's events are written beside the capture (or under ``$XLAPROF_CACHE_DIR``), stamped
with the capture's size and mtime, with the summary in the file's metadata: a second load reads
only the metadata, and the lazy ``Trace.events``/``Trace.select`` read the events from here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.model.device import DeviceSummary
from xlaprof.model.pod import HostSummary, typed_steps

if TYPE_CHECKING:
    import pandas as pd

CACHE_SUFFIX = ".xlaprof.parquet"
# 2: events carry group_id; 3: the device tables have the autotune category and the host-vs-
# device columns (device_idle_s, lazy_tensor, bound)
CACHE_VERSION = "3"
CACHE_DIR_ENV = "XLAPROF_CACHE_DIR"


def cache_path_for(path: Path) -> Path:
    """Beside the capture when its folder is writable, else under ``$XLAPROF_CACHE_DIR``.

    The default cache folder is ``~/.cache/xlaprof``; files there are named by a hash of the
    capture's absolute path.
    """
    beside = path.with_name(path.name + CACHE_SUFFIX)
    if os.access(path.parent, os.W_OK) and not os.environ.get(CACHE_DIR_ENV):
        return beside
    import hashlib

    root = Path(os.environ.get(CACHE_DIR_ENV) or Path.home() / ".cache" / "xlaprof")
    digest = hashlib.sha1(str(path.absolute()).encode()).hexdigest()[:16]
    return root / f"{digest}-{path.name}{CACHE_SUFFIX}"


def _stamp(path: Path, first_step: int, session: str) -> str:
    stat = path.stat()  # follows a link: the capture itself
    return f"{CACHE_VERSION}:{stat.st_size}:{stat.st_mtime_ns}:{first_step}:{session}"


_SUMMARY_TABLES = ("step_bounds", "steps")
_DEVICE_TABLES = ("devices", "steps", "ops", "utilization", "tracing")


def _table_bytes(frame: pd.DataFrame) -> str:
    """A small table as base64 Parquet: dtypes (categoricals, nullable ints) survive."""
    import base64
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer)
    return base64.b64encode(buffer.getvalue()).decode()


def _table_from(text: str) -> pd.DataFrame:
    import base64
    import io

    import pyarrow.parquet as pq

    frame: pd.DataFrame = pq.read_table(io.BytesIO(base64.b64decode(text))).to_pandas()
    return frame


def _summary_record(summary: HostSummary) -> dict[str, Any]:
    model = summary.device
    return {
        "host": summary.host,
        "events": summary.events,
        "profile_start_ns": summary.profile_start_ns,
        **{name: _table_bytes(getattr(summary, name)) for name in _SUMMARY_TABLES},
        "device": {name: _table_bytes(getattr(model, name)) for name in _DEVICE_TABLES},
        "device_events": model.events,
    }


def write_cache(
    events: pd.DataFrame,
    summary: HostSummary,
    target: Path,
    source: Path,
    first_step: int,
    session: str,
) -> str | None:
    """Write ``events`` (all columns but ``args``) and the summary; None if it cannot be."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = [c for c in events.columns if c != "args"]
    frame = events[columns]
    frame.attrs = {}
    table = pa.Table.from_pandas(frame, preserve_index=False)
    metadata = dict(table.schema.metadata or {})
    metadata[b"xlaprof.stamp"] = _stamp(source, first_step, session).encode()
    metadata[b"xlaprof.summary"] = json.dumps(_summary_record(summary)).encode()
    table = table.replace_schema_metadata(metadata)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        pq.write_table(table, partial, compression="zstd")
        os.replace(partial, target)
    except OSError:
        return None
    return str(target)


def cached_summary(
    target: Path | None, source: Path, first_step: int, session: str
) -> HostSummary | None:
    import pyarrow.parquet as pq

    if target is None or not target.exists():
        return None
    try:
        metadata = pq.read_schema(target).metadata or {}
        if metadata.get(b"xlaprof.stamp", b"").decode() != _stamp(source, first_step, session):
            return None
        record = json.loads(metadata[b"xlaprof.summary"])
        tables = {name: _table_from(record[name]) for name in _SUMMARY_TABLES}
        device = record["device"]  # _DEVICE_TABLES
        model = DeviceSummary(
            devices=_table_from(device["devices"]),
            steps=_table_from(device["steps"]),
            ops=_table_from(device["ops"]),
            utilization=_table_from(device["utilization"]),
            tracing=_table_from(device["tracing"]),
            events=record["device_events"],
        )
    except (OSError, ValueError, KeyError):
        return None
    return HostSummary(
        host=record["host"],
        path=str(source),
        events=record["events"],
        profile_start_ns=record["profile_start_ns"],
        step_bounds=tables["step_bounds"],
        steps=typed_steps(tables["steps"]),
        ops=model.ops,
        device=model,
        cache=str(target),
    )
