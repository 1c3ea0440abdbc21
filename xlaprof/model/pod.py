"""A pod load's data: what a worker returns per host, what failed, the merged load, and the
events left in the per-host caches until a query asks for them (``EventSource``).

Made by ``xlaprof.inputs.pod`` (the workers, the cache, the runner); read by ``Trace`` and the
tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.model.device import DeviceSummary

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


@dataclass
class HostSummary:
    """What one worker sends back for one host: small, whatever the host's event count."""

    host: str
    path: str
    events: int
    profile_start_ns: int | None
    # host, step, start_ns, end_ns of each host step (``Trace.step_bounds`` rows)
    step_bounds: pd.DataFrame
    # one row per (device, step): HOST_STEP_COLUMNS
    steps: pd.DataFrame
    # device ops of this host (``Trace.device_ops()`` rows)
    ops: pd.DataFrame
    # the device model of this host (``xlaprof.tables.device.summarize``): merged by the parent
    device: DeviceSummary
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

    def step_bounds(self) -> pd.DataFrame:
        return concat_frames(
            [s.step_bounds for s in self.summaries], ["host", "step", "start_ns", "end_ns"]
        )

    def host_steps(self) -> pd.DataFrame:
        return concat_frames([s.steps for s in self.summaries], HOST_STEP_COLUMNS)

    def record(self) -> dict[str, Any]:
        """The load, for ``--json`` (``trace.pod``): per host events, seconds, worker, RSS."""
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
                }
                for s in sorted(self.summaries, key=lambda s: s.host)
            ],
            "errors": [vars(e) for e in self.errors],
        }


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


@dataclass
class EventSource:
    """A pod capture's events, left in the per-host Parquet caches until asked for."""

    caches: dict[str, str]  # host -> cache file
    load: PodLoad | None = None  # the workers' summaries
    # host -> the name its cache holds, where hosts were named apart (``hosts_named_apart``)
    stored: dict[str, str] = field(default_factory=dict)

    @property
    def hosts(self) -> list[str]:
        return sorted(self.caches)

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
        import pandas as pd

        if host and self.stored.get(host, host) != host and "host" in frame:
            frame["host"] = pd.Categorical([host] * len(frame))
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
