"""The per-host worker: one host's capture -> its small ``HostSummary``.

This is what runs in each worker process (local pool or dask worker), so its memory is about one
host's worth; the parent only merges the summaries (``runner``).
"""

from __future__ import annotations

import os
import re
import resource
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.errors import InputNotRecognized, InputUnreadable, XlaprofError
from xlaprof.inputs.captures import (
    XPLANE_SUFFIX,
    device_table,
    embedded_protos,
    hlo_sources,
    insert_session,
    load_capture_file,
)
from xlaprof.inputs.pod.cache import cache_path_for, cached_summary, write_cache
from xlaprof.model.device import DeviceSummary
from xlaprof.model.ondisk import BOTTLENECK, DEVICE_STEPS, HOST_STEPS, STEP_BOUNDS, TRACING
from xlaprof.model.pod import (
    CATEGORY_COLUMNS,
    HOST_STEP_COLUMNS,
    HostSummary,
    typed_steps,
)
from xlaprof.parse.xplane.schema import read_capture
from xlaprof.safeio import data_digest
from xlaprof.tables import device as device_model
from xlaprof.tables.device.categories import COLLECTIVE_NAMES
from xlaprof.tables.intervals import Coverage
from xlaprof.tables.step_numbers import assign_steps
from xlaprof.tables.step_stats import by_device, host_aggregates

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

HOST_DEVICE = "host"  # the ``device`` of host-plane rows
# Collective communication, by event or HLO op name (``categories.COLLECTIVE_NAMES``, any case).
COLLECTIVE = re.compile("|".join(map(re.escape, COLLECTIVE_NAMES)), re.IGNORECASE)


def summarize_capture(
    path: str | os.PathLike[str],
    first_step: int = 0,
    cache: bool = True,
    session: str = "",
    limit: int | None = None,
    cache_dir: str | None = None,
) -> HostSummary:
    """One host's capture -> its ``HostSummary``, writing (or reusing) its Parquet cache and
    the per-step tables beside it.

    Runs in a worker process (local pool or dask worker); raises ``XlaprofError`` naming the
    file when the capture cannot be read. Without a cache the per-step tables travel in the
    summary (``frames``). ``limit`` caps the capture's size (``--max-size``; None: the
    reader's own cap); ``cache_dir``: the cache folder set (``PodSettings.cache_dir``).
    """
    started = time.perf_counter()
    path = Path(path)
    root = None if cache_dir is None else Path(cache_dir)
    cache_path = cache_path_for(path, root) if cache else None
    notes: list[str] = []  # why a cache was not reused (shown once, as a trace warning)
    hit = cached_summary(cache_path, path, first_step, session, notes, root) if cache_path else None
    if hit is not None:
        summary = hit
        summary.cache_hit = True
    else:
        events, bounds = read_host_events(path, first_step, session, limit)
        content = events.attrs.pop("content", None)
        summary, tables = summarize_events(events, bounds, path)
        if cache_path is not None:
            summary.cache = write_cache(
                events, summary, tables, cache_path, path, first_step, session, content, root
            )
        if summary.cache is None:
            summary.frames = tables
        del events, tables
    summary.notes = notes
    summary.seconds = time.perf_counter() - started
    summary.worker = f"{socket.gethostname()}:{os.getpid()}"
    summary.worker_peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return summary


def read_host_events(
    path: Path, first_step: int = 0, session: str = "", limit: int | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One host's events with session and step numbers, and its step bounds.

    ``events.attrs["devices"]`` keeps the host's device table (``Trace.devices`` rows),
    ``attrs["hlo_protos"]`` the programs an xplane embeds (``embedded_protos``: where device
    time per source line comes from), and for an xplane ``attrs["content"]`` the fingerprint
    of the bytes decoded (``data_digest``: read once, for both).
    """

    content = None
    try:
        data = None
        if path.name.endswith(XPLANE_SUFFIX):
            data = read_capture(path, limit)
            content = data_digest(data)
        # the cache keeps every column but args
        events = load_capture_file(path, args=False, limit=limit, data=data)
        del data
    except XlaprofError:
        raise
    except (ValueError, UnicodeDecodeError, EOFError, OSError) as error:
        reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
        raise InputUnreadable(f"{path}: not a readable trace ({reason})") from None
    if events.empty:
        raise InputNotRecognized(f"{path}: the trace holds no events")
    devices = device_table([events], session)
    start = events.attrs.get("profile_start_ns")
    for column in CATEGORY_COLUMNS:
        if column in events and events[column].dtype != "category":
            events[column] = events[column].astype("category")
    insert_session(events, session)
    host = str(events["host"].iloc[0])
    events["step"], bounds = assign_steps(events, first_step, {host: start})
    bounds.insert(0, "session", session)
    protos = events.attrs.get("hlo_protos") or []
    events.attrs = {"devices": devices, "profile_start_ns": start, "hlo_protos": protos}
    if content is not None:
        events.attrs["content"] = content
    return events, bounds


def summarize_events(
    events: pd.DataFrame, bounds: pd.DataFrame, path: Path | str = ""
) -> tuple[HostSummary, dict[str, pd.DataFrame]]:
    """One host's events -> its summary (device model without per-step rows, aggregates) and
    its per-step tables (``xlaprof.model.ondisk.TABLES``), which the caller writes to disk.

    The device model places op time at source lines from the programs the capture embeds
    (``attrs["hlo_protos"]``), as ``load_trace`` does in memory, so that a pod's
    ``device_time_by_line`` is that of its hosts read in memory."""
    import pandas as pd

    host = str(events["host"].iloc[0]) if len(events) else ""
    sources = hlo_sources(embedded_protos([events]))
    model = device_model.summarize_host(events, events.attrs.get("devices"), bounds, sources)
    steps = host_step_rows(events, bounds, model.steps)
    bottleneck = model.bottleneck if model.bottleneck is not None else pd.DataFrame()
    tables = {
        STEP_BOUNDS: bounds.assign(host=bounds["host"].astype(str)),
        DEVICE_STEPS: model.steps,
        TRACING: model.tracing,
        HOST_STEPS: steps,
        BOTTLENECK: bottleneck,
    }
    aggregates = host_aggregates(
        steps, model.steps, model.tracing, {name: len(frame) for name, frame in tables.items()}
    )
    empty = pd.DataFrame()
    device = DeviceSummary(
        devices=model.devices,
        steps=empty,
        ops=model.ops,
        utilization=model.utilization,
        tracing=empty,
        events=model.events,
        warnings=model.warnings,
        bottleneck=empty,
        lines=model.lines,
        line_totals=model.line_totals,
        bottleneck_by_device=by_device(model),
    )
    summary = HostSummary(
        host=host,
        path=str(path),
        events=len(events),
        profile_start_ns=events.attrs.get("profile_start_ns"),
        ops=model.ops,
        device=device,
        aggregates=aggregates,
    )
    return summary, tables


def host_step_rows(
    events: pd.DataFrame, bounds: pd.DataFrame, device_steps: pd.DataFrame
) -> pd.DataFrame:
    """One host's straggler rows (HOST_STEP_COLUMNS): per host step and per (device, step).

    Host rows: the step's wall time is boundary to boundary (``bounds``); ``collective_ms`` is
    the union of the host's collective events in the step; ``own_ms`` the rest of the wall time
    (the host's own work, or idle). Device rows (one per device plane, from the device model's
    ``device_steps``): wall is the device's step window (its ``Steps`` event when there is one,
    else the extent of its events in the step); busy is the union of its events; collective
    and own as on the host.
    """
    import numpy as np
    import pandas as pd

    host = str(events["host"].iloc[0]) if len(events) else ""
    host_plane = (events["plane_kind"] == "host").to_numpy()
    # collectives by time, not by step label: a wait that crosses a step boundary counts in both
    waits = events[host_plane & _collective_mask(events)]
    coverage = Coverage.of(waits["start_ns"].to_numpy(), waits["end_ns"].to_numpy())
    starts = bounds["start_ns"].to_numpy(dtype=np.int64)
    ends = bounds["end_ns"].to_numpy(dtype=np.int64)
    collective = np.asarray(coverage.within(starts, ends), dtype=np.int64)
    numbers = bounds["step"].to_numpy(dtype=np.int64)
    host_rows = _rows(host, HOST_DEVICE, numbers, starts, ends - starts, None, collective)
    stepped = host_plane & events["step"].notna().to_numpy()
    labels = events["step"].to_numpy(dtype=np.int64, na_value=0)[stepped]
    counted = _counts_of(labels, numbers)
    host_rows["events"] = pd.arrays.IntegerArray(counted, np.zeros(len(counted), dtype=bool))
    mine = device_steps[device_steps["step"].notna()]
    start = mine["start_ns"].to_numpy(dtype=np.int64)
    device_rows = _rows(
        host,
        mine["device"].astype(str).array,
        mine["step"].to_numpy(dtype=np.int64),
        start,
        mine["end_ns"].to_numpy(dtype=np.int64) - start,
        np.round(mine["busy_s"].to_numpy(dtype=np.float64) * 1e9).astype(np.int64),
        np.round(mine["collective_s"].to_numpy(dtype=np.float64) * 1e9).astype(np.int64),
    )
    # counted on host rows only
    device_rows["events"] = pd.arrays.IntegerArray(
        np.zeros(len(device_rows), np.int64), np.ones(len(device_rows), dtype=bool)
    )
    frames = [f for f in (host_rows, device_rows) if len(f)]
    if not frames:
        return typed_steps(pd.DataFrame(columns=HOST_STEP_COLUMNS))
    return typed_steps(pd.concat(frames, ignore_index=True)[HOST_STEP_COLUMNS])


def _counts_of(labels: np.ndarray, numbers: np.ndarray) -> np.ndarray:
    """How many of ``labels`` equal each of ``numbers`` (int64 arrays): step labels counted
    without a frame of the stepped events."""
    import numpy as np

    if len(labels) and len(numbers):
        low, high = int(numbers.min()), int(numbers.max())
        if high - low <= 4 * (len(labels) + len(numbers)):  # a table of every number between
            inside = (labels >= low) & (labels <= high)
            table = np.bincount(labels[inside] - low, minlength=high - low + 1)
            return np.asarray(table[numbers - low], dtype=np.int64)
    distinct, counts = np.unique(labels, return_counts=True)
    if not len(distinct):
        return np.zeros(len(numbers), np.int64)
    at = np.minimum(np.searchsorted(distinct, numbers), len(distinct) - 1)
    return np.where(distinct[at] == numbers, counts[at], 0).astype(np.int64)


def _collective_mask(events: pd.DataFrame) -> Any:
    """Which events are collectives, by name or HLO op (matched once per distinct name)."""
    import numpy as np

    mask = np.zeros(len(events), dtype=bool)
    for column in ("name", "hlo_op"):
        values = events[column]
        if values.dtype != "category":
            values = values.astype("category")
        hits = [bool(COLLECTIVE.search(str(c))) for c in values.cat.categories]
        codes = values.cat.codes.to_numpy()
        if any(hits):
            lookup = np.asarray([*hits, False])  # code -1 (missing) -> last entry
            mask |= lookup[codes]
    return mask


def _rows(
    host: str,
    device: Any,
    step: Any,
    start: Any,
    wall_ns: Any,
    busy_ns: Any,
    collective_ns: Any,
) -> pd.DataFrame:
    """Straggler rows from arrays (nanoseconds in, milliseconds out; busy None: not measured)."""
    import numpy as np
    import pandas as pd

    count = len(step)
    return pd.DataFrame(
        {
            "host": _repeated(host, count),
            "device": _repeated(device, count) if isinstance(device, str) else device,
            "step": step,
            "start_ns": start,
            "wall_ms": wall_ns / 1e6,
            "busy_ms": np.full(count, np.nan) if busy_ns is None else busy_ns / 1e6,
            "collective_ms": collective_ns / 1e6,
            "own_ms": np.maximum(wall_ns - collective_ns, 0) / 1e6,
        }
    )


def _repeated(text: str, count: int) -> Any:
    """``text`` ``count`` times as pandas text (the dtype ``astype(str)`` makes), taken from one
    value rather than converted from a list of them."""
    import numpy as np
    import pandas as pd

    return pd.array([text], dtype="str").take(np.zeros(count, np.intp))
