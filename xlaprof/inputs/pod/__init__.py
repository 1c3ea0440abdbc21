"""Pod-scale traces: reduce each host where its data is, merge only summaries.

A TPU pod writes one trace file per host; concatenating every event of 128 hosts into one
DataFrame needs tens of GB. Here each host is read by a worker (a local process pool, workers =
cores by default, or a ``dask.distributed`` cluster with ``scheduler=ADDRESS``), which:

1. parses the host's capture (``xspace_frame``) and numbers its steps (``assign_steps``),
2. writes the host's events once to a Parquet cache beside the capture (or under
   ``$XLAPROF_CACHE_DIR`` where the capture's folder is read-only), stamped with the capture's
   size and mtime so a second load reuses it,
3. returns a ``HostSummary``: step bounds, one row per (device, step) and op totals -- kilobytes.

The parent merges the summaries, so its memory is about one host's worth, whatever the pod size.
``Trace.events`` is then a dask DataFrame over the caches (one partition per host), and
``Trace.select`` reads only the hosts, steps, time window and names asked for (pyarrow filters
push down into the Parquet read).

A host whose capture cannot be read is named in ``PodLoad.errors`` (and a warning on stderr)
and the others are analyzed.

The per-(device, step) rows are built from what the trace model offers today (host step bounds,
the device ``Steps`` line, event intervals); ``summarize_events`` is the one place to swap in
``Trace.device_steps()``/``device_ops()`` when the device model lands.

The package: ``summary`` (the per-host worker), ``cache`` (the Parquet cache) and ``runner``
(local pool, dask, progress); the data they share (``HostSummary``, ``PodLoad``, ``EventSource``)
is in ``xlaprof.model.pod``. This module holds ``load_pod``, ``wants_lazy`` and ``host_steps``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from xlaprof.errors import BadCapture, InputUnreadable
from xlaprof.inputs.pod.cache import CACHE_DIR_ENV
from xlaprof.inputs.pod.cluster import SCHEDULER_ENV
from xlaprof.inputs.pod.runner import summarize_hosts
from xlaprof.inputs.pod.summary import summarize_events
from xlaprof.model.pod import HOST_STEP_COLUMNS, EventSource, concat_frames
from xlaprof.model.trace import DEVICE_COLUMNS, Trace
from xlaprof.tables import device as device_model

if TYPE_CHECKING:
    import pandas as pd

# Above this many bytes of trace files in all, a several-host capture loads lazily
# (``$XLAPROF_LAZY_BYTES`` overrides it).
LAZY_BYTES = 64 * 1024**2
LAZY_BYTES_ENV = "XLAPROF_LAZY_BYTES"


def wants_lazy(files: Sequence[Path], lazy: bool | None, scheduler: str | None) -> bool:
    """Whether ``files`` load as a pod (see ``load_trace``)."""
    if len(files) < 2 or lazy is False:
        return False
    if lazy or scheduler or os.environ.get(SCHEDULER_ENV):
        return True
    limit = int(os.environ.get(LAZY_BYTES_ENV) or LAZY_BYTES)
    return sum(f.stat().st_size for f in files) >= limit


def load_pod(
    files: Sequence[Path],
    first_step: int = 0,
    workers: int | None = None,
    scheduler: str | None = None,
    session: str = "",
    sessions: list[str] | None = None,
    progress: bool | None = None,
) -> Trace:
    """A lazy ``Trace`` of many hosts: summaries merged, events left in the caches.

    Hosts that could not be read are in ``Trace.warnings`` (the CLI prints them); if none
    could, ``BadCapture`` is raised, as for ``load_trace``.
    """
    import pandas as pd

    load = summarize_hosts(files, first_step, workers, scheduler, progress, session=session)
    if not load.summaries:
        first = load.errors[0]
        raise BadCapture(
            f"every capture file is unreadable ({len(files)} hosts; first: {first.message})"
        )
    missing = [s.host for s in load.summaries if s.cache is None]
    if missing:
        raise InputUnreadable(
            f"{missing[0]}: the event cache could not be written; set {CACHE_DIR_ENV} "
            "to a writable folder"
        )
    bounds = load.step_bounds()
    bounds["host"] = bounds["host"].astype("category")
    model = device_model.merge_summaries(s.device for s in load.summaries)
    devices = model.devices if not model.devices.empty else pd.DataFrame(columns=DEVICE_COLUMNS)
    source = EventSource(
        {s.host: s.cache for s in load.summaries if s.cache},
        load,
        {s.host: s.stored_host for s in load.summaries},
    )
    warnings = [
        f"host {e.host} left out: {e.message} (the other hosts are analyzed)" for e in load.errors
    ]
    warnings += [note for s in load.summaries for note in s.notes]
    model.warnings = list(warnings)
    return Trace(
        events=source.frame(),
        files=sorted(Path(s.path) for s in load.summaries),
        step_bounds=bounds,
        devices=devices,
        session=session,
        sessions=sessions or [session],
        warnings=warnings,
        device_summary=model,
        source=source,
    )


def host_steps(trace: Trace) -> pd.DataFrame:
    """One row per (host, device, step) for ``trace``: HOST_STEP_COLUMNS.

    A lazy (pod) trace has them from its workers; an in-memory trace is summarized host by host
    the same way.
    """
    if trace.source is not None and trace.source.load is not None:
        return trace.source.load.host_steps()
    frames: list[pd.DataFrame] = []
    events, all_bounds = trace.events, trace.step_bounds
    if all_bounds is None:  # a Trace made without a loader: no steps were found
        return concat_frames(frames, HOST_STEP_COLUMNS)
    for host in trace.hosts:
        mine = events[events["host"] == host]
        bounds = all_bounds[all_bounds["host"] == host]
        frames.append(summarize_events(mine, bounds).steps)
    return concat_frames(frames, HOST_STEP_COLUMNS)
