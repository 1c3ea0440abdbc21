"""The per-host Parquet cache: a host's events and its summary, written once, reused.

Each host's events are written beside the capture (or under ``$XLAPROF_CACHE_DIR``), with the
summary in the file's metadata: a second load reads only the metadata, and the lazy
``Trace.events``/``Trace.select`` read the events from here.

A capture folder may have come from anyone, and so may a cache in it. A cache is reused only when
it is a regular file (not a link) owned by this user and its stamp verifies: an HMAC, under this
user's private key (``safeio.user_key``), of the capture's *content* fingerprint (size and mtime
survive ``cp -p``, ``rsync -t`` and tar), the step numbering, the cache's own column schema, row
count and summary. Anything else (a planted cache, a stale one, junk columns, a read error) is a
miss: the cache is rebuilt and the reason said once (``notes``, shown as a trace warning). The
cache and its temporary file are created exclusively without following links; a link where the
cache goes is refused, and the cache goes to the private cache folder instead.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.model.device import DeviceSummary
from xlaprof.model.pod import HostSummary, typed_steps
from xlaprof.safeio import (
    DEFAULT_XPLANE_LIMIT,
    UnsafeFile,
    file_digest,
    input_limit,
    open_owned,
    replace_into,
    temp_beside,
    user_key,
)

if TYPE_CHECKING:
    import pandas as pd

CACHE_SUFFIX = ".xlaprof.parquet"
# 2: events carry group_id; 3: the device tables have the autotune category and the host-vs-
# device columns (device_idle_s, lazy_tensor, bound); 4: the bottleneck table, the host_transfer
# category, and each step's bound from the one step model (tables/story.py)
CACHE_VERSION = "4"
CACHE_DIR_ENV = "XLAPROF_CACHE_DIR"


def cache_path_for(path: Path) -> Path:
    """Beside the capture when its folder is writable, else under ``$XLAPROF_CACHE_DIR``.

    The default cache folder is ``~/.cache/xlaprof``; files there are named by a hash of the
    capture's absolute path.
    """
    beside = path.with_name(path.name + CACHE_SUFFIX)
    writable = os.access(path.parent, os.W_OK) and not os.environ.get(CACHE_DIR_ENV)
    if writable and not os.path.islink(beside):  # a link there was planted: never used
        return beside
    digest = hashlib.sha1(str(path.absolute()).encode()).hexdigest()[:16]
    return _private_root() / f"{digest}-{path.name}{CACHE_SUFFIX}"


def _private_root() -> Path:
    return Path(os.environ.get(CACHE_DIR_ENV) or Path.home() / ".cache" / "xlaprof")


@functools.lru_cache(maxsize=256)
def _content(path: str, size: int, mtime_ns: int, inode: int) -> str:
    """The capture's content fingerprint (read once per process per version of the file)."""
    return file_digest(Path(path), input_limit(DEFAULT_XPLANE_LIMIT))


def _stamp(path: Path, first_step: int, session: str, table: str = "") -> str:
    """The signed stamp of a cache of capture ``path``; ``table`` describes the cache's own
    columns, rows and summary. Raises ``UnsafeFile`` when this user has no private key."""
    key = user_key(_private_root())
    if key is None:
        raise UnsafeFile(f"no private key in {_private_root()} to sign caches with")
    info = path.stat()  # follows a link: the capture itself
    content = _content(str(path), info.st_size, info.st_mtime_ns, info.st_ino)
    text = f"{CACHE_VERSION}:{content}:{first_step}:{session}:{table}"
    return f"{CACHE_VERSION}:" + hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def _family(kind: object) -> str:
    """A column type as the Parquet round trip keeps it (text, int, float, ...)."""
    import pyarrow as pa

    assert isinstance(kind, pa.DataType)
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind):
        return "text"
    if pa.types.is_integer(kind):
        return "int"
    if pa.types.is_floating(kind):
        return "float"
    return str(kind)


def _described(schema: object, rows: int, summary: bytes) -> str:
    """What the stamp covers of the cache itself: columns and types, rows, the summary."""
    import pyarrow as pa

    assert isinstance(schema, pa.Schema)
    columns = ",".join(f"{field.name}:{_family(field.type)}" for field in schema)
    digest = hashlib.sha256(summary).hexdigest()
    return hashlib.sha256(f"{columns}|{rows}|{digest}".encode()).hexdigest()


_SUMMARY_TABLES = ("step_bounds", "steps")
_DEVICE_TABLES = ("devices", "steps", "ops", "utilization", "tracing", "bottleneck")


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

    return pq.read_table(io.BytesIO(base64.b64decode(text))).to_pandas()


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
    record = json.dumps(_summary_record(summary)).encode()
    try:
        described = _described(table.schema, table.num_rows, record)
        metadata[b"xlaprof.stamp"] = _stamp(source, first_step, session, described).encode()
    except (OSError, UnsafeFile):
        metadata[b"xlaprof.stamp"] = b""  # unsigned: readable for this load, never reused
    metadata[b"xlaprof.summary"] = record
    table = table.replace_schema_metadata(metadata)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = temp_beside(target)
        with os.fdopen(fd, "wb") as handle:
            pq.write_table(table, handle, compression="zstd")
        replace_into(partial, target)
    except (OSError, UnsafeFile):
        return None
    return str(target)


def cached_summary(
    target: Path | None,
    source: Path,
    first_step: int,
    session: str,
    notes: list[str] | None = None,
) -> HostSummary | None:
    """The summary kept in ``target`` if it may be reused (see the module docstring); None
    otherwise, with the reason in ``notes`` unless there simply is no cache yet."""
    if target is None or not os.path.lexists(target):
        return None
    try:
        return _read_cached(target, source, first_step, session)
    except Exception as error:  # any failure is a miss: the cache is rebuilt
        if notes is not None:
            reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
            notes.append(f"{target}: cache not reused ({reason}); rebuilt")
        return None


class _Mismatch(ValueError):
    pass


def _read_cached(target: Path, source: Path, first_step: int, session: str) -> HostSummary:
    import pyarrow.parquet as pq

    with os.fdopen(open_owned(target), "rb") as handle:
        parquet = pq.ParquetFile(handle)
        metadata = parquet.schema_arrow.metadata or {}
        record_bytes = metadata[b"xlaprof.summary"]
        described = _described(parquet.schema_arrow, parquet.metadata.num_rows, record_bytes)
    stamp = metadata.get(b"xlaprof.stamp", b"").decode()
    if not hmac.compare_digest(stamp, _stamp(source, first_step, session, described)):
        raise _Mismatch(
            "it does not match this capture: another or a changed capture, other columns, "
            "or not written by xlaprof for this user"
        )
    record = json.loads(record_bytes)
    tables = {name: _table_from(record[name]) for name in _SUMMARY_TABLES}
    model = DeviceSummary(
        **{name: _table_from(record["device"][name]) for name in _DEVICE_TABLES},
        events=record["device_events"],
    )
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
