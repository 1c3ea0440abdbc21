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
"""

from __future__ import annotations

import json
import os
import re
import resource
import socket
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.errors import InputNotRecognized, InputUnreadable, XlaprofError

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.analysis.trace import Trace

CACHE_SUFFIX = ".xlaprof.parquet"
CACHE_VERSION = "1"
SCHEDULER_ENV = "XLAPROF_DASK_SCHEDULER"
CACHE_DIR_ENV = "XLAPROF_CACHE_DIR"
# Above this many bytes of trace files in all, a several-host capture loads lazily
# (``$XLAPROF_LAZY_BYTES`` overrides it).
LAZY_BYTES = 64 * 1024**2
LAZY_BYTES_ENV = "XLAPROF_LAZY_BYTES"
HOST_DEVICE = "host"  # the ``device`` of host-plane rows
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
# Collective communication, by event or HLO op name: XLA HLO (all-reduce.3, all-gather-start),
# NCCL/RCCL kernels, and torch_xla's host-side collective calls.
COLLECTIVE = re.compile(
    r"all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all|allreduce|allgather|"
    r"reducescatter|alltoall|nccl|rccl|AllReduce|AllGather|ReduceScatter|AllToAll|"
    r"CollectivePermute",
    re.IGNORECASE,
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


# -- the per-host worker -------------------------------------------------------------------


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
    hit = _cached_summary(cache_path, path, first_step, session) if cache_path else None
    if hit is not None:
        summary = hit
        summary.cache_hit = True
    else:
        events, bounds = read_host_events(path, first_step, session)
        summary = summarize_events(events, bounds, path)
        if cache_path is not None:
            summary.cache = _write_cache(events, summary, cache_path, path, first_step, session)
        del events
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

    from xlaprof.analysis.steps import assign_steps
    from xlaprof.analysis.trace import _device_table, _load_one

    try:
        events = _load_one(path)
    except XlaprofError:
        raise
    except (ValueError, UnicodeDecodeError, EOFError, OSError) as error:
        reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
        raise InputUnreadable(f"{path}: not a readable trace ({reason})") from None
    if events.empty:
        raise InputNotRecognized(f"{path}: the trace holds no events")
    devices = _device_table([events], session)
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
    wait_starts, wait_ends = waits["start_ns"].to_numpy(), waits["end_ns"].to_numpy()
    for bound in bounds.itertuples(index=False):
        start, end = int(bound.start_ns), int(bound.end_ns)
        inside = (wait_starts < end) & (wait_ends > start)
        collective = _union(wait_starts[inside], wait_ends[inside], start, end)
        rows.append(
            _row(host, HOST_DEVICE, int(bound.step), start, end - start, None, collective)
            | {"events": int(counts.get(bound.step, 0))}
        )
    from xlaprof.analysis import device as device_model

    model = device_model.summarize_host(events, events.attrs.get("devices"), bounds)
    for row in model.steps.itertuples(index=False):
        if row.step is None or row.step != row.step or row.step is pd.NA:
            continue
        wall = int(row.end_ns) - int(row.start_ns)
        busy = round(float(row.busy_s) * 1e9)
        collective = round(float(row.collective_s) * 1e9)
        rows.append(
            _row(host, str(row.device), int(row.step), int(row.start_ns), wall, busy, collective)
            | {"events": None}
        )
    steps = _typed_steps(pd.DataFrame(rows, columns=STEP_COLUMNS))
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


def _union(starts: Iterable[int], ends: Iterable[int], low: int, high: int) -> int:
    """Length (ns) of the union of intervals, clipped to [low, high]."""
    import numpy as np

    a = np.clip(np.asarray(starts, dtype=np.int64), low, high)
    b = np.clip(np.asarray(ends, dtype=np.int64), low, high)
    if not len(a):
        return 0
    order = np.argsort(a, kind="stable")
    a, b = a[order], np.maximum.accumulate(b[order])
    # a new run starts where an interval begins after every earlier one ended
    gaps = np.maximum(a[1:] - b[:-1], 0).sum()
    return int(b[-1] - a[0] - gaps)


# -- the Parquet cache ---------------------------------------------------------------------


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


def _stamp(path: Path, first_step: int, session: str) -> str:
    stat = path.stat()  # follows a link: the capture itself
    return f"{CACHE_VERSION}:{stat.st_size}:{stat.st_mtime_ns}:{first_step}:{session}"


_SUMMARY_TABLES = ("step_bounds", "steps")
_DEVICE_TABLES = ("devices", "steps", "ops", "utilization", "tracing")


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
    return {
        "host": summary.host,
        "events": summary.events,
        "profile_start_ns": summary.profile_start_ns,
        **{name: _table_bytes(getattr(summary, name)) for name in _SUMMARY_TABLES},
        "device": {name: _table_bytes(getattr(model, name)) for name in _DEVICE_TABLES},
        "device_events": model.events,
    }


def _write_cache(
    events: pd.DataFrame,
    summary: HostSummary,
    target: Path,
    source: Path,
    first_step: int,
    session: str,
) -> str | None:
    """Write ``events`` (all columns but ``args``) and the summary; None if it cannot be."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = [c for c in events.columns if c != "args"]
    frame = events[columns]
    frame.attrs = {}
    table = pa.Table.from_pandas(frame, preserve_index=False)
    metadata = dict(table.schema.metadata or {})
    metadata[b"xlaprof.stamp"] = _stamp(source, first_step, session).encode()
    metadata[b"xlaprof.summary"] = json.dumps(_summary_record(summary)).encode()
    table = table.replace_schema_metadata(metadata)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        pq.write_table(table, partial, compression="zstd")
        os.replace(partial, target)
    except OSError:
        return None
    return str(target)


def _cached_summary(
    target: Path | None, source: Path, first_step: int, session: str
) -> HostSummary | None:
    import pyarrow.parquet as pq

    from xlaprof.analysis import device as device_model

    if target is None or not target.exists():
        return None
    try:
        metadata = pq.read_schema(target).metadata or {}
        if metadata.get(b"xlaprof.stamp", b"").decode() != _stamp(source, first_step, session):
            return None
        record = json.loads(metadata[b"xlaprof.summary"])
        tables = {name: _table_from(record[name]) for name in _SUMMARY_TABLES}
        model = device_model.HostSummary(
            **{name: _table_from(record["device"][name]) for name in _DEVICE_TABLES},
            events=record["device_events"],
        )
    except (OSError, ValueError, KeyError):
        return None
    return HostSummary(
        host=record["host"],
        path=str(source),
        events=record["events"],
        profile_start_ns=record["profile_start_ns"],
        step_bounds=tables["step_bounds"],
        steps=_typed_steps(tables["steps"]),
        ops=model.ops,
        device=model,
        cache=str(target),
    )


# -- running the workers -------------------------------------------------------------------


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def summarize_hosts(
    files: Sequence[Path],
    first_step: int = 0,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool | None = None,
    cache: bool = True,
    session: str = "",
) -> PodLoad:
    """Summaries of every host in ``files``: a local process pool, or a dask cluster.

    ``scheduler`` (or ``$XLAPROF_DASK_SCHEDULER``) is a ``dask.distributed`` scheduler address
    (``tcp://host:8786``); its workers must see the captures at the same paths (shared storage)
    and have xlaprof installed. ``progress`` shows a bar of hosts done (default: when stderr is
    a terminal).
    """
    scheduler = scheduler or os.environ.get(SCHEDULER_ENV) or None
    if progress is None:
        progress = sys.stderr.isatty()
    outcomes: list[HostSummary | HostError] = []
    with _Progress(len(files), progress) as bar:
        if scheduler:
            count = _run_dask(files, first_step, scheduler, cache, session, outcomes, bar.advance)
        else:
            count = workers or min(len(files), default_workers())
            _run_local(files, first_step, count, cache, session, outcomes, bar.advance)
    summaries = _named_apart([o for o in outcomes if isinstance(o, HostSummary)])
    errors = sorted((o for o in outcomes if isinstance(o, HostError)), key=lambda e: e.path)
    return PodLoad(summaries, errors, scheduler, count)


def _named_apart(summaries: list[HostSummary]) -> list[HostSummary]:
    """Hosts are named by ``XSpace.hostnames``; where several files name the same host (copies,
    or processes of one machine), those are named by their file names, as ``load_trace`` does.
    Each summary's tables are renamed; ``stored_host`` keeps the name its cache holds."""
    from xlaprof.parse.xplane import host_from_filename

    counts: dict[str, int] = {}
    for summary in summaries:
        counts[summary.host] = counts.get(summary.host, 0) + 1
    taken: set[str] = set()
    for summary in sorted(summaries, key=lambda s: s.path):
        summary.stored_host = summary.host
        name = summary.host
        if counts[name] > 1:
            name = host_from_filename(Path(summary.path))
        while name in taken:
            name = f"{name}#2" if "#" not in name else f"{name}+"
        taken.add(name)
        if name != summary.host:
            summary.host = name
            summary.step_bounds = summary.step_bounds.assign(host=name)
            summary.steps = summary.steps.assign(host=name)
            model = summary.device
            for table in ("devices", "steps", "ops", "utilization", "tracing"):
                frame = getattr(model, table)
                if "host" in frame.columns:
                    setattr(model, table, frame.assign(host=name))
            summary.ops = model.ops
    return summaries


def _failure(path: Path, error: BaseException) -> HostError:
    from xlaprof.parse.xplane import host_from_filename

    message = str(error) if isinstance(error, XlaprofError) else f"{path}: {error}"
    return HostError(host=host_from_filename(path), path=str(path), message=message)


def _run_local(
    files: Sequence[Path],
    first_step: int,
    workers: int,
    cache: bool,
    session: str,
    outcomes: list[HostSummary | HostError],
    advance: Callable[[], None],
) -> None:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    if workers <= 1 or len(files) == 1:
        for path in files:
            try:
                outcomes.append(summarize_host(path, first_step, cache, session))
            except Exception as error:
                outcomes.append(_failure(path, error))
            advance()
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {
            pool.submit(summarize_host, path, first_step, cache, session): path for path in files
        }
        for future in as_completed(futures):
            try:
                outcomes.append(future.result())
            except Exception as error:
                outcomes.append(_failure(futures[future], error))
            advance()


def _run_dask(
    files: Sequence[Path],
    first_step: int,
    scheduler: str,
    cache: bool,
    session: str,
    outcomes: list[HostSummary | HostError],
    advance: Callable[[], None],
) -> int:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise XlaprofError(
            "--scheduler needs dask.distributed: pip install 'xlaprof[pod]'"
        ) from None
    try:
        client = Client(scheduler, timeout="20s")
    except (OSError, TimeoutError) as error:
        raise XlaprofError(f"{scheduler}: no dask scheduler answers ({error})") from None
    with client:
        workers = len(client.scheduler_info().get("workers", {}))
        futures = client.map(
            summarize_host,
            [str(p) for p in files],
            first_step=first_step,
            cache=cache,
            session=session,
            pure=False,
        )
        paths = {future.key: Path(path) for future, path in zip(futures, files, strict=True)}
        for future in as_completed(futures):
            try:
                outcomes.append(future.result())
            except Exception as error:
                outcomes.append(_failure(paths[future.key], error))
            advance()
    return workers


class _Progress:
    """A rich bar of hosts done, on stderr, only when asked (a terminal by default)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled = total, enabled and total > 1
        self._bar: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self._bar = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("hosts", total=self.total)
        return self

    def advance(self) -> None:
        if self._bar is not None:
            self._bar.advance(self._task)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


# -- events on demand ----------------------------------------------------------------------


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

    from xlaprof.analysis.trace import DEVICE_COLUMNS, Trace
    from xlaprof.errors import BadCapture

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
    model = load.device_summary()
    devices = model.devices if not model.devices.empty else pd.DataFrame(columns=DEVICE_COLUMNS)
    source = EventSource(
        {s.host: s.cache for s in load.summaries if s.cache},
        load,
        {s.host: s.stored_host for s in load.summaries},
    )
    warnings = [
        f"host {e.host} left out: {e.message} (the other hosts are analyzed)" for e in load.errors
    ]
    model.warnings = list(warnings)
    return Trace(
        events=source.frame(),
        files=sorted(Path(s.path) for s in load.summaries),
        step_bounds=bounds,
        devices=devices,
        session=session,
        sessions=sessions or [session],
        warnings=warnings,
        _summary=model,
        source=source,
    )


def host_steps(trace: Trace) -> pd.DataFrame:
    """One row per (host, device, step) for ``trace``: STEP_COLUMNS.

    A lazy (pod) trace has them from its workers; an in-memory trace is summarized host by host
    the same way.
    """
    if trace.source is not None and trace.source.load is not None:
        return trace.source.load.host_steps()
    frames = []
    events = trace.events
    for host in trace.hosts:
        mine = events[events["host"] == host]
        bounds = trace.step_bounds[trace.step_bounds["host"] == host]
        frames.append(summarize_events(mine, bounds).steps)
    return _concat(frames, STEP_COLUMNS)
