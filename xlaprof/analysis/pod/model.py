"""The pod load's data: what a worker returns per host, what failed, and the merged load.

Shared by the worker (``summary``), the cache (``cache``), the runner (``runner``) and the
event source (``events``), so it lives apart from all of them and none imports another in a
circle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

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
STEP_COLUMNS = [
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
    # one row per (device, step): STEP_COLUMNS
    steps: pd.DataFrame
    # device ops of this host (``Trace.device_ops()`` rows)
    ops: pd.DataFrame
    # the device model of this host (``analysis.device.summarize_host``): merged by the parent
    device: Any = None
    cache: str | None = None
    cache_hit: bool = False
    seconds: float = 0.0
    # the worker process: "hostname:pid" and its peak RSS so far (MB)
    worker: str = ""
    worker_peak_rss_mb: float = 0.0
    # the host name in the cache (before ``_named_apart``)
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
        return _concat(
            [s.step_bounds for s in self.summaries], ["host", "step", "start_ns", "end_ns"]
        )

    def host_steps(self) -> pd.DataFrame:
        return _concat([s.steps for s in self.summaries], STEP_COLUMNS)

    def device_summary(self) -> Any:
        """The device model of every host, merged (``analysis.device.merge_summaries``)."""
        from xlaprof.analysis import device as device_model

        return device_model.merge_summaries(s.device for s in self.summaries)

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


def _concat(frames: Sequence[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    import pandas as pd

    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)


def _typed_steps(steps: pd.DataFrame) -> pd.DataFrame:
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
