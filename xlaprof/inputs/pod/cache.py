"""The per-host Parquet cache: a host's events, its per-step tables and its summary, written
once, reused.

Each host's events are written beside the capture (or under ``$XLAPROF_CACHE_DIR``), with the
summary (small tables and the per-step aggregates) in the file's metadata: a second load reads
only the metadata, and the lazy ``Trace.events``/``Trace.select`` read the events from here.
The per-step tables (``xlaprof.model.ondisk.TABLES``) are files of their own beside it,
``<capture>.xlaprof.<table>.parquet``, each signed as the cache is, read only when asked for.

A capture folder may have come from anyone, and so may a cache in it. A cache is reused only
when it and each of its tables is a regular file (not a link) owned by this user and its stamp
verifies: an HMAC, under this user's private key (``safeio.user_key``), of the capture's
*content* fingerprint (size and mtime survive ``cp -p``, ``rsync -t`` and tar), the step
numbering, the file's own column schema, row count and every column's values, and the summary
(the table's name for a table): a cache edited in place (values changed, schema and rows kept)
does not verify. Anything else (a planted cache, a stale one, junk columns, a read error) is a
miss: the cache is rebuilt and the reason said once (``notes``, shown as a trace warning). The
cache, its tables and their temporary files are created exclusively without following links; a
link where one goes is refused, and the cache goes to the private cache folder instead.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.model.device import DeviceSummary
from xlaprof.model.ondisk import HOST_STEPS, OPTIONAL_TABLES, TABLES
from xlaprof.model.pod import HostSummary
from xlaprof.model.stats import StepAggregates
from xlaprof.parse.units import loads as load_json
from xlaprof.safeio import (
    DEFAULT_XPLANE_LIMIT,
    UnsafeFile,
    file_digest,
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
# category, and each step's bound from the one step model (tables/story.py); 5: per-step tables
# in files of their own, aggregates in the metadata
# 6: the tracing table has host_busy_s; 7: the stamp covers the columns' values, not only their
# schema and rows; 8: the summary keeps device time per source line (lines, line_totals);
# 9: a host's step aggregates keep its first and last host step
CACHE_VERSION = "10"  # 10: a host's step walls twice: of every step and of its whole steps
# Rows per row group of a per-step table: a read of a range of steps skips the others.
TABLE_ROW_GROUP = 16384
# Statistics (row groups' minimum and maximum) only where reads filter on ranges: writing them
# for every column is a third of the write's time.
_STATISTICS = ["step", "start_ns", "end_ns"]
# The events' times as deltas: events are in start order, so these are small numbers (faster to
# write and read, and smaller, than zstd on the values).
_EVENT_DELTAS = ("start_ns", "end_ns")


def cache_path_for(path: Path, root: Path | None = None) -> Path:
    """Beside the capture when its folder is writable and no cache folder was set (``root``:
    ``$XLAPROF_CACHE_DIR``, read at the edge into ``PodSettings.cache_dir``), else there.

    The default cache folder is ``~/.cache/xlaprof``; files there are named by a hash of the
    capture's absolute path.
    """
    beside = path.with_name(path.name + CACHE_SUFFIX)
    writable = os.access(path.parent, os.W_OK) and root is None
    planted = [beside, *(table_path(beside, name) for name in TABLES + OPTIONAL_TABLES)]
    if writable and not any(map(os.path.islink, planted)):  # a link there: never used
        return beside
    digest = hashlib.sha1(str(path.absolute()).encode()).hexdigest()[:16]
    return _private_root(root) / f"{digest}-{path.name}{CACHE_SUFFIX}"


def table_path(cache: Path, name: str) -> Path:
    """Where per-step table ``name`` of the cache ``cache`` is: beside it."""
    return cache.with_name(cache.name.removesuffix(".parquet") + f".{name}.parquet")


def _private_root(root: Path | None) -> Path:
    """The cache folder set (``root``), else ``~/.cache/xlaprof``: where caches that cannot sit
    beside their capture go, and this user's private key."""
    return root if root is not None else Path.home() / ".cache" / "xlaprof"


@functools.lru_cache(maxsize=256)
def _content(path: str, size: int, mtime_ns: int, ctime_ns: int, inode: int) -> str:
    """The capture's content fingerprint (read once per process per version of the file).

    The change time is in the key because nobody can set it: a file rewritten in place with
    its size and modification time kept (``cp -p``, ``touch -r``) still gets a new one, so a
    long-lived process (a notebook, the MCP server) reads it again."""
    return file_digest(Path(path), DEFAULT_XPLANE_LIMIT)  # protobuf's cap: no capture is larger


def _stamp(
    path: Path,
    first_step: int,
    session: str,
    table: str = "",
    content: str | None = None,
    root: Path | None = None,
) -> str:
    """The signed stamp of a cache of capture ``path``; ``table`` describes the cache's own
    columns, rows and summary; ``content``: the fingerprint of the bytes the cache was made
    from (``safeio.data_digest``), where the maker had them, else the file's as it is now. Raises
    ``UnsafeFile`` when this user has no private key."""
    key = user_key(_private_root(root))
    if key is None:
        raise UnsafeFile(f"no private key in {_private_root(root)} to sign caches with")
    if content is None:
        info = path.stat()  # follows a link: the capture itself
        content = _content(str(path), info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
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


def _described(table: object, summary: bytes) -> str:
    """What the stamp covers of the cache itself: columns and types, rows, every column's
    values, the summary.

    The values are covered through their Arrow IPC form, one column at a time, in the one
    form ``_canonical`` gives them: the same however the file splits or types them.
    """
    import pyarrow as pa

    assert isinstance(table, pa.Table)
    columns = ",".join(f"{field.name}:{_family(field.type)}" for field in table.schema)
    values = hashlib.sha256()
    for name, column in zip(table.column_names, table.columns, strict=True):
        batch = pa.record_batch(list(_canonical(column)), names=[name, f"{name}.valid"])
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        values.update(sink.getvalue().to_pybytes())
    digest = hashlib.sha256(summary).hexdigest()
    text = f"{columns}|{table.num_rows}|{values.hexdigest()}|{digest}"
    return hashlib.sha256(text.encode()).hexdigest()


def _canonical(column: Any) -> tuple[Any, Any]:
    """A column's values and which are there (not null), in the form the Parquet round trip
    cannot change: one chunk, dictionaries decoded, text as large strings, a fixed value under
    each null (Arrow leaves whatever bytes were there) and no validity bitmap of its own."""
    import pyarrow as pa

    array = column.combine_chunks() if column.num_chunks else pa.array([], column.type)
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_string(array.type):
        array = array.cast(pa.large_string())
    elif pa.types.is_binary(array.type):
        array = array.cast(pa.large_binary())
    valid = array.is_valid()
    if array.null_count and not pa.types.is_null(array.type):
        if pa.types.is_large_string(array.type):
            fill = pa.scalar("", array.type)
        elif pa.types.is_boolean(array.type):
            fill = pa.scalar(False)
        else:
            fill = pa.scalar(0).cast(array.type)
        array = array.fill_null(fill)
    buffers = array.buffers()
    if array.type.num_fields == 0 and buffers and buffers[0] is not None and not array.null_count:
        array = pa.Array.from_buffers(array.type, len(array), [None, *buffers[1:]], 0, array.offset)
    return array, valid


# the small tables (the per-step ones are files of their own); device time per source line is
# None where the host's events carried no program to read lines from
_DEVICE_TABLES = ("devices", "ops", "utilization", "bottleneck_by_device")
_LINE_TABLES = ("lines", "line_totals")


def _table_bytes(frame: pd.DataFrame) -> str:
    """A small table as base64 Parquet: dtypes (categoricals, nullable ints) survive."""
    import base64
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False, nthreads=1), buffer)
    return base64.b64encode(buffer.getvalue()).decode()


def _table_from(text: str) -> pd.DataFrame:
    import base64
    import io

    import pyarrow.parquet as pq

    return frame_as_written(pq.read_table(io.BytesIO(base64.b64decode(text))))


def _optional_bytes(frame: pd.DataFrame | None) -> str | None:
    return None if frame is None else _table_bytes(frame)


def _optional_from(text: str | None) -> pd.DataFrame | None:
    return None if text is None else _table_from(text)


def frame_as_written(table: Any) -> pd.DataFrame:
    """``table``, an Arrow table ``pa.Table.from_pandas`` made and Parquet kept, as the frame it
    was made from, dtypes included.

    Arrow restores categoricals and nullable integers from the pandas dtypes its metadata
    records, but pandas 3 reads text as its ``str`` dtype and lists as numpy arrays: a cache
    hit's small tables would differ from a fresh run's. So each column the frame held as
    Python objects (``numpy_type`` object: text, lists, None) is read back as Python objects.
    Metadata that says anything else leaves the column as Arrow reads it.
    """

    import pandas as pd

    frame: pd.DataFrame = table.to_pandas()
    described = load_json((table.schema.metadata or {}).get(b"pandas", b"{}"))
    columns = described.get("columns") if isinstance(described, dict) else None
    for column in columns if isinstance(columns, list) else []:
        if not isinstance(column, dict) or column.get("numpy_type") != "object":
            continue
        name = column.get("field_name")
        if isinstance(name, str) and name in table.column_names:
            values = table.column(name).to_pylist()
            frame[name] = pd.Series(values, index=frame.index, dtype=object)
    return frame


def _summary_record(summary: HostSummary) -> dict[str, Any]:
    model = summary.device
    assert model is not None and summary.aggregates is not None
    return {
        "host": summary.host,
        "events": summary.events,
        "profile_start_ns": summary.profile_start_ns,
        "device": {name: _table_bytes(getattr(model, name)) for name in _DEVICE_TABLES},
        "lines": {name: _optional_bytes(getattr(model, name)) for name in _LINE_TABLES},
        "device_events": model.events,
        "aggregates": summary.aggregates.to_json(),
    }


def _layout(table: Any, deltas: Iterable[str], split_floats: bool) -> dict[str, Any]:
    """How ``pq.write_table`` stores ``table``'s columns (what is read back is the same):

    - dictionary pages for text columns only: for a column of distinct numbers the writer
      tries a dictionary, gives up, and has paid for both;
    - ``deltas`` (integer columns in about increasing order) as deltas;
    - with ``split_floats``, floating-point columns split by byte (zstd then finds the repeated
      high bytes of the times: smaller and faster than on the whole values);
    - zstd, but nothing for a column that holds only nulls, or one dictionary value and no null (its
      pages are a few bytes of runs, which compressing only costs).
    """
    import pyarrow as pa

    texts, encodings, compression = [], {}, {}
    for index, field in enumerate(table.schema):
        kind, column = field.type, table.column(index)
        if (
            pa.types.is_dictionary(kind)
            or pa.types.is_string(kind)
            or pa.types.is_large_string(kind)
        ):
            texts.append(field.name)
        elif split_floats and pa.types.is_floating(kind):
            encodings[field.name] = "BYTE_STREAM_SPLIT"
        trivial = column.null_count == len(column) or (
            column.null_count == 0
            and pa.types.is_dictionary(kind)
            and all(len(chunk.dictionary) <= 1 for chunk in column.chunks)
        )
        compression[field.name] = "none" if trivial else "zstd"
    for name in deltas:
        encodings[name] = "DELTA_BINARY_PACKED"
    return {
        "use_dictionary": texts,
        "column_encoding": encodings,
        "compression": compression,
    }


def _stored(table: Any) -> Any:
    """``table`` as the cache stores it: the same values, read back as the same frame, with

    - each column that holds no null declared so (Parquet then keeps no definition level per
      value for it: a tenth of the events' write);
    - each categorical of no categories (a column no event fills) a dictionary of text: Arrow
      makes it a dictionary of nulls, which Parquet reads back as plain nulls (an object
      column), a dictionary of text as the categorical written.
    """
    import pyarrow as pa

    fields, columns = [], []
    for field, column in zip(table.schema, table.columns, strict=True):
        kind = field.type
        if pa.types.is_dictionary(kind) and pa.types.is_null(kind.value_type):
            kind = pa.dictionary(kind.index_type, pa.large_string(), kind.ordered)
            column = pa.chunked_array(
                [
                    pa.DictionaryArray.from_arrays(chunk.indices, pa.array([], pa.large_string()))
                    for chunk in column.chunks
                ],
                kind,
            )
        nullable = column.null_count > 0 or pa.types.is_null(kind)  # a null column must be
        fields.append(field.with_type(kind).with_nullable(nullable))
        columns.append(column)
    schema = pa.schema(fields, metadata=table.schema.metadata)
    return pa.Table.from_arrays(columns, schema=schema)


def _write_signed(
    table: Any,
    target: Path,
    source: Path,
    first_step: int,
    session: str,
    summary: bytes,
    content: str | None = None,
    root: Path | None = None,
    **options: Any,
) -> None:
    """Write an Arrow table to ``target`` (exclusively, through a temporary file, never
    through a link), stamped over its columns, rows and ``summary`` (unsigned where this user
    has no key: readable for this load, never reused)."""
    import pyarrow.parquet as pq

    metadata = dict(table.schema.metadata or {})
    try:
        described = _described(table, summary)
        stamp = _stamp(source, first_step, session, described, content, root)
        metadata[b"xlaprof.stamp"] = stamp.encode()
    except (OSError, UnsafeFile):
        metadata[b"xlaprof.stamp"] = b""
    table = table.replace_schema_metadata(metadata)
    fd, partial = temp_beside(target)
    with os.fdopen(fd, "wb") as handle:
        pq.write_table(table, handle, **options)
    replace_into(partial, target)


# What the stamp covers (capture, step, session, content) and where the key is: each its own.
def write_cache(  # noqa: PLR0913
    events: pd.DataFrame,
    summary: HostSummary,
    tables: dict[str, pd.DataFrame],
    target: Path,
    source: Path,
    first_step: int,
    session: str,
    content: str | None = None,
    root: Path | None = None,
) -> str | None:
    """Write ``events`` (all columns but ``args``) with the summary, and each per-step table
    in ``tables`` beside it (``table_path``; their paths go to ``summary.tables``); None if
    they cannot be written. The tables go first: a cache file names only tables written.
    ``content``: the fingerprint of the bytes ``events`` were decoded from (``_stamp``)."""
    import pyarrow as pa

    columns = [c for c in events.columns if c != "args"]
    frame = events[columns]
    frame.attrs = {}
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        paths = {}
        for name in TABLES:
            path = table_path(target, name)
            rows = tables[name]
            if name == HOST_STEPS:  # by step, so that a range of steps is a few row groups
                rows = rows.sort_values(["step", "device"], kind="stable", ignore_index=True)
            _write_table(rows, path, name, source, first_step, session, content, root)
            paths[name] = str(path)
        summary.tables = paths
        # no type is asked for, so nothing is cast; unchecked, pyarrow does not check each
        # categorical's codes again (pandas made them: ~0.5 ms a column of a million events)
        table = _stored(pa.Table.from_pandas(frame, preserve_index=False, nthreads=1, safe=False))
        record = json.dumps(_summary_record(summary)).encode()
        metadata = dict(table.schema.metadata or {})
        metadata[b"xlaprof.summary"] = record
        deltas = [c for c in _EVENT_DELTAS if c in frame]
        _write_signed(
            table.replace_schema_metadata(metadata),
            target,
            source,
            first_step,
            session,
            record,
            content,
            root,
            write_statistics=_STATISTICS,
            **_layout(table, deltas, split_floats=True),
        )
    except (OSError, UnsafeFile):
        summary.tables = {}
        return None
    return str(target)


def cached_summary(
    target: Path | None,
    source: Path,
    first_step: int,
    session: str,
    notes: list[str] | None = None,
    root: Path | None = None,
) -> HostSummary | None:
    """The summary kept in ``target`` if it may be reused (see the module docstring); None
    otherwise, with the reason in ``notes`` unless there simply is no cache yet."""
    if target is None or not os.path.lexists(target):
        return None
    try:
        return _read_cached(target, source, first_step, session, root)
    except Exception as error:  # any failure is a miss: the cache is rebuilt
        if notes is not None:
            reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
            notes.append(f"{target}: cache not reused ({reason}); rebuilt")
        return None


class _Mismatch(ValueError):
    pass


def _read_cached(
    target: Path, source: Path, first_step: int, session: str, root: Path | None = None
) -> HostSummary:
    import pandas as pd

    _, record_bytes = _verified(target, source, first_step, session, None, root)
    tables = {name: table_path(target, name) for name in TABLES}
    for name, path in tables.items():  # each per-step table written with this cache
        _verified(path, source, first_step, session, name.encode(), root)
    for name in OPTIONAL_TABLES:  # one made later (the timeline), where it verifies
        path = table_path(target, name)
        verified = _optional_verified(path, name, source, first_step, session, root)
        if os.path.lexists(path) and verified:
            tables[name] = path
    record = load_json(record_bytes)
    device = record["device"]  # the tables of _DEVICE_TABLES
    lines = {name: _optional_from(record["lines"][name]) for name in _LINE_TABLES}
    # the per-step rows stay in their files: the parent reads them when asked
    empty = pd.DataFrame()
    model = DeviceSummary(
        devices=_table_from(device["devices"]),
        ops=_table_from(device["ops"]),
        utilization=_table_from(device["utilization"]),
        bottleneck_by_device=_table_from(device["bottleneck_by_device"]),
        lines=lines["lines"],
        line_totals=lines["line_totals"],
        steps=empty,
        tracing=empty,
        bottleneck=empty,
        events=record["device_events"],
    )
    return HostSummary(
        host=record["host"],
        path=str(source),
        events=record["events"],
        profile_start_ns=record["profile_start_ns"],
        ops=model.ops,
        device=model,
        aggregates=StepAggregates.from_json(record["aggregates"]),
        tables={name: str(path) for name, path in tables.items()},
        cache=str(target),
    )


def _optional_verified(
    path: Path, name: str, source: Path, first_step: int, session: str, root: Path | None = None
) -> bool:
    """Whether optional table ``path`` verifies (one that does not is never read, and is made
    again and replaced when asked for: it does not cost the cache)."""
    try:
        _verified(path, source, first_step, session, name.encode(), root)
    except Exception:  # any failure: not reused
        return False
    return True


def write_table(
    frame: pd.DataFrame,
    cache: Path,
    name: str,
    source: Path,
    first_step: int,
    session: str,
    root: Path | None = None,
) -> str | None:
    """Write per-step table ``name`` of the cache ``cache`` of capture ``source`` beside it,
    signed as the worker signs its tables (an optional table made after the load: the
    timeline); its path, or None where it cannot be written."""
    path = table_path(cache, name)
    try:
        _write_table(frame, path, name, source, first_step, session, root=root)
    except (OSError, UnsafeFile):
        return None
    return str(path)


def _write_table(
    rows: pd.DataFrame,
    path: Path,
    name: str,
    source: Path,
    first_step: int,
    session: str,
    content: str | None = None,
    root: Path | None = None,
) -> None:
    """Per-step table ``name`` to ``path``, signed over its name (``_write_signed``)."""
    import pyarrow as pa

    # one thread: the pool pyarrow starts for a table costs the worker more CPU time than it
    # saves
    arrow = _stored(pa.Table.from_pandas(rows, preserve_index=False, nthreads=1))
    # step numbers and times rise with the rows: deltas
    numbers = [f.name for f in arrow.schema if pa.types.is_integer(f.type)]
    _write_signed(
        arrow,
        path,
        source,
        first_step,
        session,
        name.encode(),
        content,
        root,
        row_group_size=TABLE_ROW_GROUP,
        **_layout(arrow, numbers, split_floats=False),
    )


def _verified(
    path: Path,
    source: Path,
    first_step: int,
    session: str,
    summary: bytes | None,
    root: Path | None = None,
) -> tuple[dict[bytes, bytes], bytes]:
    """The metadata of cache file ``path`` and the summary its stamp covers (the events
    cache's ``xlaprof.summary`` when ``summary`` is None), if the stamp verifies."""
    import pyarrow.parquet as pq

    with os.fdopen(open_owned(path), "rb") as handle:
        # The whole file is read: the stamp covers the values (an edit in place changes them).
        table = pq.ParquetFile(handle).read()
        metadata = table.schema.metadata or {}
        covered = metadata[b"xlaprof.summary"] if summary is None else summary
        described = _described(table, covered)
    stamp = metadata.get(b"xlaprof.stamp", b"").decode()
    if not hmac.compare_digest(stamp, _stamp(source, first_step, session, described, None, root)):
        raise _Mismatch(
            f"{path.name} does not match this capture: another or a changed capture, other "
            "columns, or not written by xlaprof for this user"
        )
    return metadata, covered
