"""A pod load's data: what a worker returns per host, what failed, the merged load, and the
events and per-step tables left in the per-host caches until a query asks for them
(``CachedEvents``, the on-disk ``xlaprof.model.trace.EventSource``).

Made by ``xlaprof.inputs.pod`` (the workers, the cache, the runner); read by ``Trace`` and the
tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xlaprof.model.device import DeviceSummary
from xlaprof.model.ondisk import (
    BOTTLENECK,
    DEVICE_STEPS,
    HOST_STEPS,
    STEP_BOUNDS,
    TIMELINE,
    TRACING,
    StepRows,
)
from xlaprof.model.rowstore import HostRows, RowStore
from xlaprof.model.trace import HostTableMaker, HostTables, Trace

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from xlaprof.model.stats import StepAggregates

CATEGORY_COLUMNS = (
    "host",
    "plane",
    "plane_kind",
    "device",
    "line",
    "name",
    "hlo_op",
    "hlo_module",
    "hlo_category",
    "program_id",
)
HOST_STEP_COLUMNS = [
    "host",
    "device",
    "step",
    "start_ns",
    "wall_ms",
    "busy_ms",
    "collective_ms",
    "own_ms",
    "events",
]
# The straggler rows' columns that stragglers and host skew read (``tables.stragglers``,
# ``tables.hosts.skew_of``): all a pod's parent reads of them for those tables.
STEP_ROW_COLUMNS = ["host", "device", "step", "wall_ms", "collective_ms", "own_ms"]


@dataclass
class HostSummary:
    """What one worker sends back for one host: small, whatever the host's event and step
    counts. Its per-step tables (``xlaprof.model.ondisk.TABLES``: step bounds, device steps,
    host vs device, the straggler rows, bottlenecks, the step timeline) are in files beside its
    event cache (``tables``), or held here (``frames``) when no cache could be written;
    ``aggregates`` is what the parent needs of them."""

    host: str
    path: str
    events: int
    profile_start_ns: int | None
    # device ops of this host (``Trace.device_ops()`` rows)
    ops: pd.DataFrame
    # the device model of this host (``xlaprof.tables.device.summarize``) without its per-step
    # rows (``steps`` and ``tracing`` are empty): merged by the parent
    device: DeviceSummary | None = None
    aggregates: StepAggregates | None = None
    # per-step table name -> its Parquet file (``xlaprof.inputs.pod.cache``)
    tables: dict[str, str] = field(default_factory=dict)
    frames: dict[str, pd.DataFrame] | None = field(default=None, repr=False)
    cache: str | None = None
    cache_hit: bool = False
    seconds: float = 0.0
    # the worker process: "hostname:pid" and its peak RSS so far (MB)
    worker: str = ""
    worker_peak_rss_mb: float = 0.0
    # the host name in the cache (before hosts were named apart)
    stored_host: str = ""
    # why the host's cache was not reused (a planted, stale or damaged cache), said once
    notes: list[str] = field(default_factory=list)


@dataclass
class HostError:
    """A host whose capture could not be read: named, and left out of the analysis."""

    host: str
    path: str
    message: str


@dataclass
class PodLoad:
    """Every host's summary (merged by the parent) and the hosts that failed."""

    summaries: list[HostSummary]
    errors: list[HostError] = field(default_factory=list)
    scheduler: str | None = None  # dask scheduler address, or None for the local pool
    workers: int = 0

    @property
    def hosts(self) -> list[str]:
        return sorted(s.host for s in self.summaries)

    def in_order(self) -> list[HostSummary]:
        """The summaries, hosts in order."""
        return sorted(self.summaries, key=lambda s: s.host)

    def record(self, partial_edges: bool) -> dict[str, Any]:
        """The load, for ``--json`` (``trace.pod``): per host events, seconds, worker, RSS,
        and its host steps' wall time (count, mean, spread, extremes, slowest steps) over the
        steps the trace's step times keep (``partial_edges``: its whole steps only)."""
        return {
            "scheduler": self.scheduler,
            "workers": self.workers,
            "hosts": [
                {
                    "host": s.host,
                    "path": s.path,
                    "events": s.events,
                    "cache": s.cache,
                    "cache_hit": s.cache_hit,
                    "seconds": s.seconds,
                    "worker": s.worker,
                    "worker_peak_rss_mb": s.worker_peak_rss_mb,
                    "steps": _walls_record(s.aggregates, partial_edges),
                }
                for s in self.in_order()
            ],
            "errors": [vars(e) for e in self.errors],
        }


def _walls_record(aggregates: StepAggregates | None, partial_edges: bool) -> dict[str, Any] | None:
    """A host's host-step wall times (ms) for ``--json``: null for a host without markers;
    where a capture was cut mid-step (``partial_edges``) of its whole steps only, as
    ``Trace.step_times`` and host skew have them (count 0 and no figures: none whole)."""
    if aggregates is None or aggregates.host is None:
        return None
    walls = aggregates.host.of(partial_edges)
    digest = walls.wall
    return {
        "count": digest.count,
        "mean_ms": digest.mean,
        "std_ms": digest.std,
        "fastest_ms": digest.low,
        "fastest_step": walls.fastest_step,
        "slowest_ms": digest.high,
        "slowest_step": walls.slowest_step,
        "median_ms": digest.approximate(0.5),  # within one 1/64-octave bin
        "p90_ms": digest.approximate(0.9),
        "slowest": [{"step": step, "wall_ms": wall} for step, wall in walls.slowest],
    }


def _distinct(numbers: np.ndarray) -> np.ndarray:
    """The distinct ``numbers``, sorted: one pass where they are sorted already (a cache's
    straggler rows are, by step)."""
    import numpy as np

    if len(numbers) < 2 or not (numbers[1:] >= numbers[:-1]).all():
        return np.unique(numbers)
    new = np.ones(len(numbers), dtype=bool)
    new[1:] = numbers[1:] != numbers[:-1]
    kept: np.ndarray = numbers[new]
    return kept


def concat_frames(frames: Sequence[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    """The non-empty ``frames`` one after another; an empty frame of ``columns`` if none."""
    import pandas as pd

    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)


def typed_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """One dtype per column whatever the rows held (unmeasured busy time: NaN)."""
    import pandas as pd

    for column in ("step", "start_ns"):
        steps[column] = steps[column].astype("int64")
    steps["events"] = steps["events"].astype("Int64")  # counted on host rows only
    for column in ("wall_ms", "busy_ms", "collective_ms", "own_ms"):
        steps[column] = pd.to_numeric(steps[column], errors="coerce").astype("float64")
    steps["host"] = steps["host"].astype(str)
    steps["device"] = steps["device"].astype(str)
    return steps


def _host_rows(summary: HostSummary, name: str) -> HostRows:
    """Where ``summary``'s host keeps its rows of per-step table ``name``: its file, or the
    rows themselves where no file could be written."""
    return HostRows(
        host=summary.host,
        path=None if summary.frames is not None else summary.tables.get(name),
        stored_host=summary.stored_host,
        rows=None if summary.aggregates is None else summary.aggregates.rows.get(name, 0),
        frame=None if summary.frames is None else summary.frames.get(name),
    )


@dataclass
class CachedEvents:
    """A pod capture's events and per-step tables, left in the per-host Parquet caches until
    asked for: the on-disk ``xlaprof.model.trace.EventSource`` (and a
    ``xlaprof.model.ondisk.StepTables``)."""

    caches: dict[str, str]  # host -> cache file
    load: PodLoad | None = None  # the workers' summaries
    # host -> the name its cache holds, where hosts were named apart (``hosts_named_apart``)
    stored: dict[str, str] = field(default_factory=dict)
    # keeps a step timeline made of the first host's events beside that host's cache, and
    # says where (None: it could not be kept): the loader's writer, ``xlaprof.inputs.pod``
    keep_timeline: Callable[[pd.DataFrame, HostSummary], str | None] | None = field(
        default=None, repr=False
    )

    @property
    def hosts(self) -> list[str]:
        return sorted(self.caches)

    @property
    def event_count(self) -> int:
        return sum(s.events for s in self.load.summaries) if self.load is not None else 0

    def _summaries(self, hosts: Sequence[str] | None = None) -> list[HostSummary]:
        if self.load is None:
            return []
        chosen = self.load.in_order()
        if hosts is not None:
            wanted = set(hosts)
            chosen = [s for s in chosen if s.host in wanted]
        return chosen

    def row_store(self) -> RowStore:
        """Where the per-step tables are, host by host (``xlaprof.model.rowstore``): each
        host's file, or its rows where no file could be written."""
        from xlaprof.model.ondisk import TABLES

        tables: dict[str, list[HostRows]] = {}
        for name in TABLES:
            hosts = [_host_rows(s, name) for s in self._summaries()]
            if any(h.path is not None or h.frame is not None for h in hosts):
                tables[name] = hosts
        return RowStore(tables)

    def table(
        self,
        name: str,
        hosts: list[str] | None = None,
        columns: list[str] | None = None,
        filters: Any = None,
    ) -> pd.DataFrame:
        """Rows of per-step table ``name`` (``xlaprof.model.ondisk.TABLES``) of ``hosts``
        (every host by default), hosts in order; ``columns`` and pyarrow ``filters`` apply
        while each host's file is read (``RowStore.read``)."""
        return self.row_store().read(name, hosts, columns, filters)

    def table_head(self, name: str, rows: int) -> pd.DataFrame:
        """The first ``rows`` rows of table ``name``, hosts in order (``RowStore.head``)."""
        return self.row_store().head(name, rows)

    def table_rows(self, name: str) -> int:
        return sum(
            s.aggregates.rows.get(name, 0) for s in self._summaries() if s.aggregates is not None
        )

    def host_steps(self, columns: list[str] | None = None) -> pd.DataFrame:
        """Every host's straggler rows (HOST_STEP_COLUMNS, or those ``columns``), read from
        disk."""
        frame = self.table(HOST_STEPS, columns=columns)
        return frame if len(frame) else concat_frames([], columns or HOST_STEP_COLUMNS)

    def held_events(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame()

    def load_record(self, trace: Trace) -> dict[str, Any]:
        return {} if self.load is None else self.load.record(trace.partial_edges)

    def host_tables(self, trace: Trace, maker: HostTableMaker) -> HostTables:
        """Host skew and stragglers from the hosts' straggler rows read a range of steps at a
        time (at most ``maker.chunk_rows`` rows held); the rows themselves stay on disk."""
        summaries = self._summaries()
        aggregates = [(s.host, s.aggregates) for s in summaries if s.aggregates]
        walls = {host: a.host for host, a in aggregates if a.host is not None}
        # a capture cut mid-step: each host's first and last host step, as its workers found
        # them, left out of host skew as ``Trace.step_times`` leaves them out
        edges = {h: (w.first_step, w.last_step) for h, w in walls.items()}
        chunks = self._step_chunks(maker.chunk_rows)
        return maker.of_chunks(set(walls), chunks, edges if trace.partial_edges else {})

    def _step_chunks(self, chunk_rows: int) -> Iterator[StepRows]:
        """Every host's straggler rows, a range of steps at a time (about ``chunk_rows``):
        the columns stragglers and host skew read, as arrays (``StepRows``)."""
        import numpy as np

        summaries = self._summaries()
        numbered = [
            s.aggregates
            for s in summaries
            if s.aggregates
            and s.aggregates.first_step is not None
            and s.aggregates.last_step is not None
        ]
        if not numbered:
            return
        rows = sum(a.rows.get(HOST_STEPS, 0) for a in numbered)
        if rows <= chunk_rows:  # one range: every numbered row at once, no step read first
            import pyarrow.compute as pc

            yield self._step_rows(pc.field("step").is_valid())
            return
        distinct = [np.zeros(0, np.int64)]  # the distinct step numbers, over hosts
        for summary in summaries:
            column = self.table(HOST_STEPS, hosts=[summary.host], columns=["step"])["step"]
            distinct.append(_distinct(column.to_numpy(dtype=np.int64)))
        steps = _distinct(np.sort(np.concatenate(distinct), kind="stable"))
        width = max(1, chunk_rows // max(1, rows // max(1, len(steps))))
        for at in range(0, len(steps), width):
            low, high = int(steps[at]), int(steps[min(at + width, len(steps)) - 1])
            yield self._step_rows([("step", ">=", low), ("step", "<=", high)])

    def _step_rows(self, filters: Any) -> StepRows:
        """Every host's straggler rows that ``filters`` keeps, as arrays: each host's file read
        in the columns stragglers and host skew use (its host is the summary's)."""
        import numpy as np
        import pandas as pd

        summaries = self._summaries()
        devices: dict[str, int] = {}
        parts: list[tuple[np.ndarray, ...]] = []
        for index, summary in enumerate(summaries):
            frame = _host_rows(summary, HOST_STEPS).read(STEP_ROW_COLUMNS[1:], filters)
            codes, names = pd.factorize(frame["device"])
            ours = np.asarray([devices.setdefault(str(n), len(devices)) for n in names] + [-1])
            parts.append(
                (
                    np.full(len(frame), index, np.int64),
                    ours[codes],  # -1 (missing) -> the last entry, -1
                    frame["step"].to_numpy(dtype=np.int64),
                    *(
                        frame[column].to_numpy(dtype="float64", na_value=np.nan)
                        for column in ("wall_ms", "collective_ms", "own_ms")
                    ),
                )
            )
        columns = [np.concatenate(column) for column in zip(*parts, strict=True)]
        if not columns:
            columns = [np.zeros(0, np.int64)] * 3 + [np.zeros(0)] * 3
        host, device, step, wall, collective, own = columns
        return StepRows(
            host,
            np.asarray([s.host for s in summaries], dtype=object),
            device,
            np.asarray(list(devices), dtype=object),
            step,
            wall,
            collective,
            own,
        )

    def step_view(self, trace: Trace, columns: Sequence[str] | None = None) -> Trace:
        """The pod's first host as an in-memory ``Trace`` (its events, step bounds and device
        model with its per-step rows, each read from that host's files alone): what the step
        timeline and the story read, as they read one host of any trace. ``columns``: only
        these of its events are read (the timeline's: a host's events grow with its steps)."""
        hosts = trace.hosts[:1]
        summary = trace.summary()

        def mine(frame: pd.DataFrame) -> pd.DataFrame:
            if "host" not in frame:
                return frame
            return frame[frame["host"].astype(str).isin(hosts)]

        model = DeviceSummary(
            devices=mine(summary.devices),
            steps=self.table(DEVICE_STEPS, hosts=hosts),
            ops=mine(summary.ops),
            utilization=mine(summary.utilization),
            tracing=self.table(TRACING, hosts=hosts),
            events=sum(s.events for s in self.load.in_order()[:1]) if self.load else 0,
            bottleneck=self.table(BOTTLENECK, hosts=hosts),
        )
        return Trace(
            events=self.select(hosts=hosts, columns=columns),
            files=trace.files[:1],
            partial_edges=trace.partial_edges,  # its step tables leave out what the pod's do
            step_bounds=self.table(STEP_BOUNDS, hosts=hosts),
            devices=None if trace.devices is None else mine(trace.devices),
            session=trace.session,
            sessions=trace.sessions,
            device_summary=model,
            step_table=trace.step_table,
        )

    def step_hosts(self, trace: Trace) -> list[str]:
        return list(trace.hosts[:1])

    def step_timeline(self, trace: Trace, make: Callable[[Trace], pd.DataFrame]) -> pd.DataFrame:
        """The first host's step timeline from its events alone: read from beside its cache
        (``ondisk.TIMELINE``), else made now by ``make`` and kept there (``keep_timeline``:
        once per pod, not per host); a kept one with no rows is made again, not kept."""
        first = self._summaries()[:1]
        if first:
            held = first[0].tables if first[0].frames is None else first[0].frames
            if TIMELINE in held:
                frame = _host_rows(first[0], TIMELINE).read(None, None)
                return frame if len(frame) else make(trace)
        timeline = make(trace)
        keep = self.keep_timeline
        if first and keep is not None and first[0].cache is not None and first[0].frames is None:
            kept = keep(timeline, first[0])
            if kept is not None:
                first[0].tables[TIMELINE] = kept
        return timeline

    def __getstate__(self) -> dict[str, Any]:
        """What a pickle keeps (a dask cluster's copy, reading a host's events): not the
        loader's ``keep_timeline``, which only the parent calls."""
        state = dict(self.__dict__)
        state.pop("keep_timeline", None)
        return state

    def frame(self) -> Any:
        """A dask DataFrame over every host's cache: one partition per host."""
        import dask.dataframe as dd
        import pyarrow.parquet as pq

        hosts = self.hosts
        meta = self._named(pq.read_schema(self.caches[hosts[0]]).empty_table().to_pandas(), "")
        return dd.from_map(self._read_host, hosts, meta=meta)

    def _read_host(self, host: str) -> pd.DataFrame:
        import pyarrow.parquet as pq

        return self._named(pq.read_table(self.caches[host]).to_pandas(), host)

    def _named(self, frame: pd.DataFrame, host: str) -> pd.DataFrame:
        """``frame`` with its host column naming ``host``, categoricals as ``load_trace`` makes."""
        import numpy as np
        import pandas as pd

        if host and self.stored.get(host, host) != host and "host" in frame:
            frame["host"] = pd.Categorical.from_codes(
                np.zeros(len(frame), np.int8), pd.Index([host])
            )
        for column in CATEGORY_COLUMNS:
            if column in frame and frame[column].dtype != "category":
                frame[column] = frame[column].astype("category")
        return frame

    def select(
        self,
        hosts: Sequence[str] | None = None,
        steps: Sequence[int] | None = None,
        start_ns: int | None = None,
        end_ns: int | None = None,
        names: Sequence[str] | None = None,
        plane_kinds: Sequence[str] | None = None,
        columns: Sequence[str] | None = None,
    ) -> pd.DataFrame:
        """The events that match, as pandas: filters are applied while reading each cache.

        ``start_ns``/``end_ns`` keep events that overlap the window.
        """
        import pandas as pd
        import pyarrow.parquet as pq

        filters: list[tuple[str, str, Any]] = []
        if steps is not None:
            filters.append(("step", "in", [int(s) for s in steps]))
        if start_ns is not None:
            filters.append(("end_ns", ">=", int(start_ns)))
        if end_ns is not None:
            filters.append(("start_ns", "<=", int(end_ns)))
        if names is not None:
            filters.append(("name", "in", list(names)))
        if plane_kinds is not None:
            filters.append(("plane_kind", "in", list(plane_kinds)))
        chosen = self.hosts if hosts is None else [h for h in self.hosts if h in set(hosts)]
        frames = [
            self._named(
                pq.read_table(
                    self.caches[host],
                    columns=list(columns) if columns else None,
                    filters=filters or None,
                ).to_pandas(),
                host,
            )
            for host in chosen
        ]
        if not frames:
            return pd.DataFrame(columns=list(columns) if columns else None)
        frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        for column in CATEGORY_COLUMNS:
            if column in frame and frame[column].dtype != "category":
                frame[column] = frame[column].astype("category")
        return frame
