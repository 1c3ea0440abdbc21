"""The per-host Parquet cache: a host's events, its per-step tables and its summary, written
once, reused.

Each host's events are written beside the capture (or under ``$XLAPROF_CACHE_DIR``), stamped
with the capture's size and mtime, with the summary (small tables and the per-step aggregates)
in the file's metadata: a second load reads only the metadata, and the lazy
``Trace.events``/``Trace.select`` read the events from here. The per-step tables
(``xlaprof.model.ondisk.TABLES``) are files of their own beside it,
``<capture>.xlaprof.<table>.parquet``, each with the same stamp, read only when asked for.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.model.device import DeviceSummary
from xlaprof.model.ondisk import HOST_STEPS, TABLES
from xlaprof.model.pod import HostSummary
from xlaprof.model.stats import StepAggregates

if TYPE_CHECKING:
    import pandas as pd

CACHE_SUFFIX = ".xlaprof.parquet"
# 2: events carry group_id; 3: the device tables have the autotune category and the host-vs-
# device columns (device_idle_s, lazy_tensor, bound); 4: per-step tables in files of their own,
# aggregates in the metadata
CACHE_VERSION = "4"
# Rows per row group of a per-step table: a read of a range of steps skips the others.
TABLE_ROW_GROUP = 16384
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


def table_path(cache: Path, name: str) -> Path:
    """Where per-step table ``name`` of the cache ``cache`` is: beside it."""
    return cache.with_name(cache.name.removesuffix(".parquet") + f".{name}.parquet")


def _stamp(path: Path, first_step: int, session: str) -> str:
    stat = path.stat()  # follows a link: the capture itself
    return f"{CACHE_VERSION}:{stat.st_size}:{stat.st_mtime_ns}:{first_step}:{session}"


_DEVICE_TABLES = ("devices", "ops", "utilization")  # the per-step ones are files of their own


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
    assert model is not None and summary.aggregates is not None
    return {
        "host": summary.host,
        "events": summary.events,
        "profile_start_ns": summary.profile_start_ns,
        "device": {name: _table_bytes(getattr(model, name)) for name in _DEVICE_TABLES},
        "device_events": model.events,
        "aggregates": summary.aggregates.to_json(),
    }


# Statistics (row groups' minimum and maximum) only where reads filter on ranges: writing them
# for every column is a third of the write's time.
_STATISTICS = ["step", "start_ns", "end_ns"]


def _write(table: Any, target: Path, stamp: str, **options: Any) -> None:
    """Write an Arrow table to ``target`` through a temporary file, stamped."""
    import pyarrow.parquet as pq

    metadata = dict(table.schema.metadata or {})
    metadata[b"xlaprof.stamp"] = stamp.encode()
    table = table.replace_schema_metadata(metadata)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    pq.write_table(table, partial, compression="zstd", **options)
    os.replace(partial, target)


def write_cache(
    events: pd.DataFrame,
    summary: HostSummary,
    tables: dict[str, pd.DataFrame],
    target: Path,
    source: Path,
    first_step: int,
    session: str,
) -> str | None:
    """Write ``events`` (all columns but ``args``) with the summary, and each per-step table
    in ``tables`` beside it (``table_path``; their paths go to ``summary.tables``); None if
    they cannot be written. The tables go first: a cache file names only tables written."""
    import pandas as pd
    import pyarrow as pa

    stamp = _stamp(source, first_step, session)
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
            arrow = pa.Table.from_pandas(rows, preserve_index=False)
            _write(arrow, path, stamp, row_group_size=TABLE_ROW_GROUP)
            paths[name] = str(path)
        summary.tables = paths
        table = pa.Table.from_pandas(frame, preserve_index=False)
        metadata = dict(table.schema.metadata or {})
        metadata[b"xlaprof.summary"] = json.dumps(_summary_record(summary)).encode()
        # dictionaries for the text columns only (a column of distinct times gains nothing)
        texts = [c for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)]
        options = {"use_dictionary": texts, "write_statistics": _STATISTICS}
        _write(table.replace_schema_metadata(metadata), target, stamp, **options)
    except OSError:
        summary.tables = {}
        return None
    return str(target)


def cached_summary(
    target: Path | None, source: Path, first_step: int, session: str
) -> HostSummary | None:
    import pandas as pd
    import pyarrow.parquet as pq

    if target is None or not target.exists():
        return None
    try:
        stamp = _stamp(source, first_step, session)
        metadata = pq.read_schema(target).metadata or {}
        if metadata.get(b"xlaprof.stamp", b"").decode() != stamp:
            return None
        tables = {name: table_path(target, name) for name in TABLES}
        for path in tables.values():  # each per-step table written with this cache
            if (pq.read_schema(path).metadata or {}).get(b"xlaprof.stamp", b"").decode() != stamp:
                return None
        record = json.loads(metadata[b"xlaprof.summary"])
        device = {name: _table_from(record["device"][name]) for name in _DEVICE_TABLES}
        # the per-step rows stay in their files: the parent reads them when asked
        empty = pd.DataFrame()
        model = DeviceSummary(**device, steps=empty, tracing=empty, events=record["device_events"])
        aggregates = StepAggregates.from_json(record["aggregates"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return HostSummary(
        host=record["host"],
        path=str(source),
        events=record["events"],
        profile_start_ns=record["profile_start_ns"],
        ops=model.ops,
        device=model,
        aggregates=aggregates,
        tables={name: str(path) for name, path in tables.items()},
        cache=str(target),
    )
