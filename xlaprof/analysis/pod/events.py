"""Events on demand: a pod's events stay in the per-host caches until a query asks for them.

``EventSource`` backs a lazy ``Trace`` (a dask DataFrame, and ``select`` with filters pushed
into the Parquet reads); ``select_frame`` gives the same filters on an in-memory frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xlaprof.analysis.pod.model import CATEGORY_COLUMNS, PodLoad

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class EventSource:
    """A pod capture's events, left in the per-host Parquet caches until asked for."""

    caches: dict[str, str]  # host -> cache file
    load: PodLoad | None = None  # the workers' summaries
    # host -> the name its cache holds, where hosts were named apart (``_named_apart``)
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
        """``frame`` with its host column naming ``host`` (categoricals as in ``load_trace``)."""
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


def select_frame(
    events: pd.DataFrame,
    hosts: Sequence[str] | None = None,
    steps: Sequence[int] | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    names: Sequence[str] | None = None,
    plane_kinds: Sequence[str] | None = None,
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """``EventSource.select`` on an in-memory frame: the same filters, the same meaning."""
    import numpy as np

    keep = np.ones(len(events), dtype=bool)
    if hosts is not None:
        keep &= events["host"].isin(list(hosts)).to_numpy()
    if steps is not None:
        keep &= events["step"].isin([int(s) for s in steps]).fillna(False).to_numpy(dtype=bool)
    if start_ns is not None:
        keep &= (events["end_ns"] >= int(start_ns)).to_numpy()
    if end_ns is not None:
        keep &= (events["start_ns"] <= int(end_ns)).to_numpy()
    if names is not None:
        keep &= events["name"].isin(list(names)).to_numpy()
    if plane_kinds is not None:
        keep &= events["plane_kind"].isin(list(plane_kinds)).to_numpy()
    frame = events[keep]
    return frame[list(columns)] if columns else frame
