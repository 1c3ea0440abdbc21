"""Pod-scale traces: reduce each host where its data is, merge only summaries.

A TPU pod writes one trace file per host; concatenating every event of 128 hosts into one
DataFrame needs tens of GB. Here each host is read by a worker (a local process pool, workers =
cores by default, or a ``dask.distributed`` cluster with ``scheduler=ADDRESS``), which:

1. parses the host's capture (``xspace_frame``) and numbers its steps (``assign_steps``),
2. writes the host's events once to a Parquet cache beside the capture (or under
   ``$XLAPROF_CACHE_DIR`` where the capture's folder is read-only), stamped with the capture's
   size and mtime so a second load reuses it,
3. writes the host's per-step tables (step bounds, device steps, host vs device, the straggler
   rows) beside it, and returns a ``HostSummary``: op totals, per-device tables and aggregates
   of the per-step tables (counts, digests, slowest steps) -- kilobytes, whatever the steps.

The parent merges the summaries, so its memory is about one host's worth, whatever the pod size
and the step count. ``Trace.events`` is then a dask DataFrame over the caches (one partition per
host), and ``Trace.select`` reads only the hosts, steps, time window and names asked for
(pyarrow filters push down into the Parquet read); the per-step tables are read when asked
for (``Trace.device_steps()``), by their first rows (``--json``), one host (the timeline) or a
range of steps at a time (``step_tables``: stragglers and host skew).

A host whose capture cannot be read is named in ``PodLoad.errors`` (and a warning on stderr)
and the others are analyzed.

The package: ``summary`` (the per-host worker), ``cache`` (the Parquet cache) and ``runner``
(local pool, dask, progress); the data they share (``HostSummary``, ``PodLoad``, ``CachedEvents``)
is in ``xlaprof.model.pod``. This module holds ``load_pod``, ``wants_lazy``, ``host_steps``,
``host_tables`` (host skew and stragglers of any several-host trace) and ``overview`` (what the
reports say of every step, from the workers' aggregates).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.errors import BadCapture, InputUnreadable
from xlaprof.inputs.pod.runner import summarize_hosts
from xlaprof.inputs.pod.summary import host_step_rows
from xlaprof.model.ondisk import DEVICE_STEPS, HOST_STEPS, TRACING, StepRows
from xlaprof.model.pod import HOST_STEP_COLUMNS, CachedEvents, HostSummary, concat_frames
from xlaprof.model.request import CACHE_DIR_ENV, LAZY_BYTES, LAZY_BYTES_ENV, PodSettings
from xlaprof.model.stats import AUTOTUNE_STEPS, Digest, StepOverview, bin_range
from xlaprof.model.trace import DEVICE_COLUMNS, HostTables, Trace
from xlaprof.tables import device as device_model
from xlaprof.tables.hosts import host_skew
from xlaprof.tables.step_stats import (
    STEP_STATS_COLUMNS,
    by_device_columns,
    merge_device_stats,
    merge_tracing_stats,
)
from xlaprof.tables.step_times import step_times
from xlaprof.tables.stragglers import stragglers

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

# Straggler rows read at once (a range of steps over every host): what the parent holds of them.
STEP_CHUNK_ROWS = 200_000
# Above ``LAZY_BYTES`` of trace files in all (``PodSettings.lazy_bytes``, which
# ``$XLAPROF_LAZY_BYTES`` sets at the edge), a several-host capture loads lazily.
__all__ = ["LAZY_BYTES", "LAZY_BYTES_ENV", "host_steps", "load_pod", "wants_lazy"]


def wants_lazy(
    files: Sequence[Path],
    lazy: bool | None,
    scheduler: str | None,
    settings: PodSettings | None = None,
) -> bool:
    """Whether ``files`` load as a pod (see ``load_trace``; ``settings``: the environment's,
    read at the edge)."""
    settings = settings or PodSettings()
    if len(files) < 2 or lazy is False:
        return False
    if lazy or scheduler or settings.env_scheduler:
        return True
    return sum(f.stat().st_size for f in files) >= settings.lazy_bytes


# Each setting of a pod's load is its own argument (the request's, passed down as given).
def load_pod(  # noqa: PLR0913
    files: Sequence[Path],
    first_step: int = 0,
    workers: int | None = None,
    scheduler: str | None = None,
    session: str = "",
    sessions: list[str] | None = None,
    progress: bool | None = None,
    limit: int | None = None,
    settings: PodSettings | None = None,
) -> Trace:
    """A lazy ``Trace`` of many hosts: summaries merged, events left in the caches.

    Hosts that could not be read are in ``Trace.warnings`` (the CLI prints them); if none
    could, ``BadCapture`` is raised, as for ``load_trace``.
    """
    import pandas as pd

    settings = settings or PodSettings()
    load = summarize_hosts(
        files,
        first_step,
        workers,
        scheduler,
        progress,
        session=session,
        limit=limit,
        settings=settings,
    )
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
    summaries = load.in_order()
    model = device_model.merge_summaries(s.device for s in summaries if s.device)
    devices = model.devices if not model.devices.empty else pd.DataFrame(columns=DEVICE_COLUMNS)
    source = CachedEvents(
        {s.host: s.cache for s in load.summaries if s.cache},
        load,
        {s.host: s.stored_host for s in load.summaries},
        keep_timeline=functools.partial(
            _keep_timeline, first_step=first_step, session=session, root=settings.cache_dir
        ),
    )
    # the per-step rows stay on disk: read when asked for, every row (``model.ondisk``)
    model.steps = None
    model.tracing = None
    model.bottleneck = None
    per_host = [s.device.bottleneck_by_device for s in summaries if s.device is not None]
    model.bottleneck_by_device = concat_frames(
        [frame for frame in per_host if frame is not None], by_device_columns()
    )
    model.tables = source
    model.overview = overview(source)
    warnings = [
        f"host {e.host} left out: {e.message} (the other hosts are analyzed)" for e in load.errors
    ]
    warnings += [note for s in load.summaries for note in s.notes]
    model.warnings = list(warnings)
    trace = Trace(
        events=source.frame(),
        files=sorted(Path(s.path) for s in load.summaries),
        step_bounds=None,
        devices=devices,
        session=session,
        sessions=sessions or [session],
        warnings=warnings,
        device_summary=model,
        source=source,
        step_table=step_times,
    )
    return trace


def _keep_timeline(
    timeline: pd.DataFrame,
    first: HostSummary,
    first_step: int,
    session: str,
    root: Path | None = None,
) -> str | None:
    """Keep the step timeline of a pod's first host (``first``), made from its events alone
    as the pipeline makes a capture's, beside that host's cache, signed as its worker signs its
    tables, so that the next load of the pod reads it instead of the events (once per pod, not
    per host: a pod shows its first host's timeline); where it was kept, or None."""
    from xlaprof.inputs.pod.cache import write_table
    from xlaprof.model.ondisk import TIMELINE

    assert first.cache is not None  # CachedEvents keeps a timeline only beside a cache
    cache, capture = Path(first.cache), Path(first.path)
    return write_table(timeline, cache, TIMELINE, capture, first_step, session, root)


def host_steps(trace: Trace) -> pd.DataFrame:
    """One row per (host, device, step) for ``trace``: HOST_STEP_COLUMNS.

    A lazy (pod) trace has them from its workers; an in-memory trace is summarized host by host
    the same way.
    """
    store = trace.events_source.row_store()
    if HOST_STEPS in store:  # a pod's: its workers' files
        stored = store.read(HOST_STEPS)
        return stored if len(stored) else concat_frames([], HOST_STEP_COLUMNS)
    frames: list[pd.DataFrame] = []
    events, all_bounds = trace.events, trace.step_bounds
    if all_bounds is None:  # a Trace made without a loader: no steps were found
        return concat_frames(frames, HOST_STEP_COLUMNS)
    device_steps = trace.device_steps()
    for host in trace.hosts:
        mine = events[events["host"] == host]
        bounds = all_bounds[all_bounds["host"] == host]
        steps = device_steps[device_steps["host"].astype(str) == host]
        frames.append(host_step_rows(mine, bounds, steps))
    return concat_frames(frames, HOST_STEP_COLUMNS)


def overview(source: CachedEvents) -> StepOverview:
    """What the reports say of every step (``tables.step_stats.StepOverview``), from the
    workers' aggregates: counts and extremes merged, each median exact, found from the merged
    histogram and the values of its one bin read back from the hosts' tables (each host's
    table read once for every median: ``_BinValues``)."""
    import pandas as pd

    summaries = source.load.in_order() if source.load is not None else []
    aggregates = [s.aggregates for s in summaries if s.aggregates is not None]
    merged = merge_device_stats(d for a in aggregates for d in a.devices)
    tracing = merge_tracing_stats(a.tracing for a in aggregates)
    device_bins = _BinValues(source, DEVICE_STEPS, "device", "step")
    for name, stats in merged.items():
        for column in ("wall_s", "busy_s", "idle_s"):
            device_bins.want(getattr(stats, column.removesuffix("_s")), column, name)
    tracing_bins = _BinValues(source, TRACING, None, "bound")
    for column, digest in (
        ("device_busy_s", tracing.busy),
        ("host_busy_s", tracing.tracing),
        ("device_idle_s", tracing.idle),
    ):
        tracing_bins.want(digest, column, None)
    rows = [
        {
            "device": name,
            "steps": stats.steps,
            "step_source": stats.source,
            "median_wall_s": stats.wall.median(device_bins.reader("wall_s", name)),
            "median_busy_s": stats.busy.median(device_bins.reader("busy_s", name)),
            "median_idle_s": stats.idle.median(device_bins.reader("idle_s", name)),
            "slowest_s": stats.slowest_s,
            "slowest_step": stats.slowest_step,
        }
        for name, stats in merged.items()
    ]
    autotune = sorted({s for a in aggregates for d in a.devices for s in d.autotune_steps})
    return StepOverview(
        devices=pd.DataFrame(rows, columns=STEP_STATS_COLUMNS),
        autotune_steps=autotune[:AUTOTUNE_STEPS],
        tracing=tracing,
        median_busy_s=tracing.busy.median(tracing_bins.reader("device_busy_s", None)),
        median_tracing_s=tracing.tracing.median(tracing_bins.reader("host_busy_s", None)),
        median_idle_s=tracing.idle.median(tracing_bins.reader("device_idle_s", None)),
    )


def _values(
    source: CachedEvents, table: str, column: str, low: float, high: float, keep: Any
) -> np.ndarray:
    """Every host's values of ``column`` in [low, high] among the rows ``keep`` selects."""
    import pyarrow.compute as pc

    chosen = keep & (pc.field(column) >= low) & (pc.field(column) <= high)
    frame = source.table(table, columns=[column], filters=chosen)
    return frame[column].to_numpy(dtype="float64", na_value=float("nan"))


class _BinValues:
    """The values an exact median reads back (``Digest.median``): of a pod's per-step
    ``table``, every host's values of a column in the range of the one bin that holds a middle
    value, among the rows of one device (``by``, None: every row) whose ``known`` column is
    set. The bins are located first (``want``), then each host's table is read once for all of
    them (the columns asked for), and only the values in those bins are kept."""

    def __init__(self, source: CachedEvents, table: str, by: str | None, known: str) -> None:
        self.source, self.table, self.by, self.known = source, table, by, known
        self.ranges: dict[tuple[str, str | None], list[tuple[float, float]]] = {}
        self.values: dict[tuple[str, str | None, float, float], list[np.ndarray]] | None = None

    def want(self, digest: Digest, column: str, group: str | None) -> None:
        """The bins ``digest.median`` will read of ``column`` (of device ``group``)."""
        if not digest.count:
            return
        middle = {digest.count // 2, (digest.count - 1) // 2}
        wanted = self.ranges.setdefault((column, group), [])
        for rank in sorted(middle):
            span = bin_range(digest.locate(rank)[0])
            if span not in wanted:
                wanted.append(span)

    def reader(self, column: str, group: str | None) -> Callable[[float, float], np.ndarray]:
        def read(low: float, high: float) -> np.ndarray:
            import numpy as np

            if self.values is None:
                self.values = self._read()
            found = self.values.get((column, group, low, high))
            if found is None:  # a bin not located first: read on its own
                return _values(self.source, self.table, column, low, high, self._keep(group))
            return np.concatenate(found) if found else np.zeros(0)

        return read

    def _keep(self, group: str | None) -> Any:
        import pyarrow.compute as pc

        valid = pc.field(self.known).is_valid()
        return valid if self.by is None else (pc.field(self.by) == group) & valid

    def _read(self) -> dict[tuple[str, str | None, float, float], list[np.ndarray]]:
        import numpy as np

        out: dict[tuple[str, str | None, float, float], list[np.ndarray]] = {}
        columns = sorted({column for column, _ in self.ranges})
        if not columns:
            return out
        named = [self.known] + ([self.by] if self.by else [])
        for host in self.source.hosts:
            frame = self.source.table(self.table, hosts=[host], columns=named + columns)
            known = frame[self.known].notna().to_numpy()
            groups = None if self.by is None else frame[self.by].astype(str).to_numpy()
            for (column, group), spans in self.ranges.items():
                rows = known if groups is None else known & (groups == group)
                values = frame[column].to_numpy(dtype="float64", na_value=np.nan)[rows]
                for low, high in spans:
                    kept = values[(values >= low) & (values <= high)]
                    out.setdefault((column, group, low, high), []).append(kept)
        return out


class _HostTables:
    """Makes a several-host trace's ``HostTables`` (``Trace.host_tables``): every row at once
    from events held in memory, or a pod's rows a range of steps at a time."""

    @property
    def chunk_rows(self) -> int:
        return STEP_CHUNK_ROWS

    def of_events(self, trace: Trace) -> HostTables:
        skew = host_skew(step_times(trace))
        rows = host_steps(trace)
        return HostTables(skew=skew, host_steps=rows, stragglers=stragglers(rows))

    def of_chunks(
        self, marked: set[str], chunks: Iterable[StepRows], edges: Mapping[str, tuple[int, int]]
    ) -> HostTables:
        import pandas as pd

        from xlaprof.tables.hosts import SKEW_COLUMNS, skew_of
        from xlaprof.tables.stragglers import COLUMNS, stragglers_of

        skews, late = [], []
        for chunk in chunks:
            skew = skew_of(chunk, marked, edges)
            if len(skew):  # a range of cut steps only has none: not concatenated as untyped
                skews.append(skew)
            late.append(stragglers_of(chunk))
            del chunk
        skew = pd.concat(skews, ignore_index=True) if skews else pd.DataFrame(columns=SKEW_COLUMNS)
        behind = pd.concat(late, ignore_index=True) if late else pd.DataFrame(columns=COLUMNS)
        return HostTables(skew=skew, host_steps=None, stragglers=behind)


HOST_TABLES = _HostTables()


def host_tables(trace: Trace) -> HostTables:
    """A several-host trace's host skew, straggler rows and stragglers: the same tables
    whether its events are held (every row at once) or a pod's (its straggler rows read a
    range of steps at a time, at most ``STEP_CHUNK_ROWS`` held; the rows stay on disk)."""
    return trace.host_tables(HOST_TABLES)


def step_tables(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``host_tables``' host skew and stragglers."""
    tables = host_tables(trace)
    return tables.skew, tables.stragglers
