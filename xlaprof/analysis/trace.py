"""``xlaprof.load_trace``: profiler traces into pandas, with step numbers and hosts.

Accepts a ``.xplane.pb`` or ``.trace.json.gz`` file, a session folder
(``plugins/profile/<time>/``), a TensorBoard logdir, or a run directory. When a folder holds the
traces of several hosts (a TPU pod writes one file per host), the files load in parallel worker
processes and the ``host`` column tells them apart.

Step numbers: on host planes, events that carry a ``step_num`` stat (``xlaprof.step``,
``xp.StepTrace``) define steps; otherwise each torch_xla ``StepMarker`` (one per
``torch_xla.sync()``) ends a step. On device planes, the XLA "Steps" line defines them. Steps are
counted from ``first_step`` (a run directory knows where its trace window began).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from xlaprof.analysis.steps import assign_steps
from xlaprof.errors import InputNotFound, InputNotRecognized
from xlaprof.parse.xplane import chrome_trace_frame, xspace_frame

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.analysis.pod import EventSource


@dataclass
class Trace:
    """Loaded trace events of one or more hosts.

    For a many-host capture loaded lazily (``xlaprof.analysis.pod``), ``events`` is a dask
    DataFrame (one partition per host, read from Parquet caches) and ``source`` is set: use
    ``select`` to get a filtered pandas frame without reading every host.
    """

    events: pd.DataFrame
    files: list[Path] = field(default_factory=list)
    # A capture starts and stops mid-step: its first and last step per host are partial.
    partial_edges: bool = False
    # host, step, start_ns, end_ns of each host step (boundaries, not event extents)
    step_bounds: pd.DataFrame | None = None
    source: EventSource | None = None

    @property
    def hosts(self) -> list[str]:
        if self.source is not None:
            return self.source.hosts
        return sorted(self.events["host"].cat.categories)

    def select(self, hosts: Sequence[str] | None = None, **filters: object) -> pd.DataFrame:
        """Events of ``hosts`` (all by default), filtered before they are read when lazy.

        Filters: ``steps``, ``start_ns``/``end_ns`` (overlapping the window), ``names``,
        ``plane_kinds``, ``columns`` (see ``pod.EventSource.select``).
        """
        from xlaprof.analysis.pod import select_frame

        if self.source is not None:
            return self.source.select(hosts, **filters)  # type: ignore[arg-type]
        return select_frame(self.events, hosts, **filters)  # type: ignore[arg-type]

    def regions(self, names: Sequence[str] | None = None) -> pd.DataFrame:
        """Host events by name and step: count and total duration (ms)."""
        columns = ["host", "step", "name", "duration_ns"]
        events = self.select(plane_kinds=["host"], names=names, columns=columns)
        grouped = events.groupby(["host", "step", "name"], observed=True)["duration_ns"]
        return grouped.agg(calls="count", total_ms=lambda d: d.sum() / 1e6).reset_index()

    def step_times(self) -> pd.DataFrame:
        """Per host and step: start, end and wall time (ms), boundary to boundary."""
        frame = self.step_bounds.copy()
        frame["wall_ms"] = (frame["end_ns"] - frame["start_ns"]) / 1e6
        if self.partial_edges:
            edges = frame.groupby("host", observed=True)["step"].agg(["min", "max"])
            first = frame["host"].map(edges["min"]).astype("Int64")
            last = frame["host"].map(edges["max"]).astype("Int64")
            frame = frame[(frame["step"] != first) & (frame["step"] != last)]
        return frame.reset_index(drop=True)


def trace_files(path: Path) -> list[Path]:
    """Every trace file at or below ``path`` (xplane files preferred over trace.json.gz)."""
    path = Path(path)
    if not path.exists():
        raise InputNotFound(f"{path}: no such file or directory")
    if path.is_file():
        return [path]
    files = sorted(path.rglob("*.xplane.pb")) or sorted(path.rglob("*.trace.json.gz"))
    if not files:
        raise InputNotRecognized(
            f"{path}: no trace here (*.xplane.pb or *.trace.json.gz under plugins/profile/); "
            "capture one with `xlaprof run --trace-steps A:B` or `xlaprof capture`"
        )
    return files


def _load_one(path: Path) -> pd.DataFrame:
    if path.name.endswith(".xplane.pb"):
        return xspace_frame(path)
    if path.name.endswith((".trace.json.gz", ".trace.json", ".json.gz", ".json")):
        return chrome_trace_frame(path)
    raise InputNotRecognized(f"{path}: not a .xplane.pb or .trace.json.gz trace")


def load_trace(
    path: str | os.PathLike[str],
    first_step: int | None = None,
    workers: int | None = None,
    lazy: bool | None = None,
    scheduler: str | None = None,
) -> Trace:
    """Load every trace file at ``path`` into one DataFrame with ``step`` numbers.

    Several hosts load lazily (``xlaprof.analysis.pod``) when ``lazy`` is True, a dask
    ``scheduler`` is given, or (``lazy=None``) their files hold more than ``pod.LAZY_BYTES``.
    """
    import pandas as pd

    from xlaprof.analysis import pod

    root = Path(path)
    files = trace_files(root)
    if first_step is None:
        first_step = _first_step_from_run(root)
    if pod.wants_lazy(files, lazy, scheduler):
        return pod.load_pod(files, first_step or 0, workers, scheduler)
    if len(files) == 1:
        frames = [_load_one(files[0])]
    else:
        workers = workers or min(len(files), os.cpu_count() or 1)
        with ProcessPoolExecutor(max_workers=workers) as pool:
            frames = list(pool.map(_load_one, files))
    starts = {
        str(frame["host"].iloc[0]): frame.attrs.get("profile_start_ns")
        for frame in frames
        if len(frame)
    }
    events = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    for column in ("host", "plane", "plane_kind", "line", "name", "hlo_op", "hlo_module"):
        if events[column].dtype != "category":
            events[column] = events[column].astype("category")
    events["step"], bounds = assign_steps(events, first_step or 0, starts)
    return Trace(events=events, files=files, step_bounds=bounds)


def _first_step_from_run(root: Path) -> int | None:
    from xlaprof.rundir.reader import find_runs, load_run

    if root.is_dir() and find_runs(root):
        runs = find_runs(root)
        if len(runs) == 1:
            window = load_run(runs[0]).info.trace_steps
            return window[0] if window else None
    return None
