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
from xlaprof.inputs.captures import device_table, load_capture_file
from xlaprof.inputs.pod.cache import cache_path_for, cached_summary, write_cache
from xlaprof.model.pod import (
    CATEGORY_COLUMNS,
    HOST_STEP_COLUMNS,
    HostSummary,
    typed_steps,
)
from xlaprof.tables import device as device_model
from xlaprof.tables.intervals import Coverage
from xlaprof.tables.step_numbers import assign_steps

if TYPE_CHECKING:
    import pandas as pd

HOST_DEVICE = "host"  # the ``device`` of host-plane rows
# Collective communication, by event or HLO op name: XLA HLO (all-reduce.3, all-gather-start),
# NCCL/RCCL kernels, and torch_xla's host-side collective calls.
COLLECTIVE = re.compile(
    r"all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all|allreduce|allgather|"
    r"reducescatter|alltoall|nccl|rccl|AllReduce|AllGather|ReduceScatter|AllToAll|"
    r"CollectivePermute",
    re.IGNORECASE,
)


def summarize_host(
    path: str | os.PathLike[str], first_step: int = 0, cache: bool = True, session: str = ""
) -> HostSummary:
    """One host's capture -> its ``HostSummary``, writing (or reusing) its Parquet cache.

    Runs in a worker process (local pool or dask worker); raises ``XlaprofError`` naming the
    file when the capture cannot be read.
    """
    started = time.perf_counter()
    path = Path(path)
    cache_path = cache_path_for(path) if cache else None
    notes: list[str] = []  # why a cache was not reused (shown once, as a trace warning)
    hit = cached_summary(cache_path, path, first_step, session, notes) if cache_path else None
    if hit is not None:
        summary = hit
        summary.cache_hit = True
    else:
        events, bounds = read_host_events(path, first_step, session)
        summary = summarize_events(events, bounds, path)
        if cache_path is not None:
            summary.cache = write_cache(events, summary, cache_path, path, first_step, session)
        del events
    summary.notes = notes
    summary.seconds = time.perf_counter() - started
    summary.worker = f"{socket.gethostname()}:{os.getpid()}"
    summary.worker_peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return summary


def read_host_events(
    path: Path, first_step: int = 0, session: str = ""
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One host's events with session and step numbers, and its step bounds.

    ``events.attrs["devices"]`` keeps the host's device table (``Trace.devices`` rows).
    """
    import pandas as pd

    try:
        events = load_capture_file(path, args=False)  # the cache keeps every column but args
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
    events.insert(0, "session", pd.Categorical([session] * len(events)))
    host = str(events["host"].iloc[0])
    events["step"], bounds = assign_steps(events, first_step, {host: start})
    bounds.insert(0, "session", session)
    events.attrs = {"devices": devices, "profile_start_ns": start}
    return events, bounds


def summarize_events(
    events: pd.DataFrame, bounds: pd.DataFrame, path: Path | str = ""
) -> HostSummary:
    """One host's events -> per (device, step) rows and device op totals.

    Host rows: the step's wall time is boundary to boundary (``bounds``); ``collective_ms`` is
    the union of the host's collective events in the step; ``own_ms`` the rest of the wall time
    (the host's own work, or idle). Device rows (one per device plane): wall is the device's
    ``Steps`` event when there is one, else the extent of its events in the step; busy is the
    union of its events; collective and own as on the host.
    """
    import pandas as pd

    host = str(events["host"].iloc[0]) if len(events) else ""
    rows: list[dict[str, Any]] = []
    stepped = events[events["step"].notna()]
    stepped = stepped.assign(_collective=_collective_mask(stepped))
    host_events = stepped[stepped["plane_kind"] == "host"]
    counts = host_events.groupby("step", observed=True).size()
    # collectives by time, not by step label: a wait that crosses a step boundary counts in both
    host_plane = events["plane_kind"] == "host"
    waits = events[host_plane.to_numpy() & _collective_mask(events)]
    coverage = Coverage.of(waits["start_ns"].to_numpy(), waits["end_ns"].to_numpy())
    collectives = coverage.within(bounds["start_ns"].to_numpy(), bounds["end_ns"].to_numpy())
    for bound, collective_ns in zip(bounds.itertuples(index=False), collectives, strict=True):
        start, end = int(bound.start_ns), int(bound.end_ns)
        collective = int(collective_ns)
        rows.append(
            _row(host, HOST_DEVICE, int(bound.step), start, end - start, None, collective)
            | {"events": int(counts.get(bound.step, 0))}
        )
    model = device_model.summarize_host(events, events.attrs.get("devices"), bounds)
    for row in model.steps.itertuples(index=False):
        if pd.isna(row.step):  # None, NaN or pd.NA (a device with no steps: "whole capture")
            continue
        wall = int(row.end_ns) - int(row.start_ns)
        busy = round(float(row.busy_s) * 1e9)
        collective = round(float(row.collective_s) * 1e9)
        rows.append(
            _row(host, str(row.device), int(row.step), int(row.start_ns), wall, busy, collective)
            | {"events": None}
        )
    steps = typed_steps(pd.DataFrame(rows, columns=HOST_STEP_COLUMNS))
    ops = model.ops
    return HostSummary(
        host=host,
        path=str(path),
        events=len(events),
        profile_start_ns=events.attrs.get("profile_start_ns"),
        step_bounds=bounds.assign(host=bounds["host"].astype(str)),
        steps=steps,
        ops=ops,
        device=model,
    )


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


def _row(
    host: str, device: str, step: int, start: int, wall_ns: int, busy: int | None, coll: int
) -> dict[str, Any]:
    return {
        "host": host,
        "device": device,
        "step": step,
        "start_ns": start,
        "wall_ms": wall_ns / 1e6,
        "busy_ms": None if busy is None else busy / 1e6,
        "collective_ms": coll / 1e6,
        "own_ms": max(wall_ns - coll, 0) / 1e6,
    }
