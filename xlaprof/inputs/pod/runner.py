"""Running the per-host workers: a local process pool or a dask cluster, with a progress bar.

Collects each host's ``HostSummary`` (or ``HostError``) into one ``PodLoad``, and names apart
hosts that several files share.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from xlaprof.errors import XlaprofError
from xlaprof.inputs.captures import hosts_named_apart
from xlaprof.inputs.pod.summary import summarize_capture
from xlaprof.model.pod import HostError, HostSummary, PodLoad
from xlaprof.model.request import PodSettings
from xlaprof.parse.events import host_from_filename


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# Each setting of a pod's load is its own argument (the request's, passed down as given).
def summarize_hosts(  # noqa: PLR0913
    files: Sequence[Path],
    first_step: int = 0,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool | None = None,
    cache: bool = True,
    session: str = "",
    limit: int | None = None,
    settings: PodSettings | None = None,
) -> PodLoad:
    """Summaries of every host in ``files``: a local process pool, or a dask cluster.

    ``scheduler`` (or ``settings.env_scheduler``) is a ``dask.distributed`` scheduler address
    (``tcp://host:8786``); its workers must see the captures at the same paths (shared storage)
    and have xlaprof installed. ``progress`` shows a bar of hosts done (default: when stderr is
    a terminal). ``limit`` caps each capture's size (``--max-size``), passed to each worker;
    ``settings``: the environment's (scheduler, client timeout, cache folder), read at the edge.
    """
    from xlaprof.inputs.pod import cluster as dask_client

    settings = settings or PodSettings()
    # checked; the environment's is announced
    scheduler = dask_client.chosen(scheduler, settings.env_scheduler)
    root = None if settings.cache_dir is None else str(settings.cache_dir)
    jobs = (cache, session, limit, root)
    if progress is None:
        progress = sys.stderr.isatty()
    outcomes: list[HostSummary | HostError] = []
    with _Progress(len(files), progress) as bar:
        if scheduler:
            count = _run_dask(
                files, first_step, scheduler, jobs, outcomes, bar.advance, settings.timeout_s
            )
        else:
            count = workers or min(len(files), default_workers())
            _run_local(files, first_step, count, jobs, outcomes, bar.advance)
    summaries = _named_apart([o for o in outcomes if isinstance(o, HostSummary)])
    errors = sorted((o for o in outcomes if isinstance(o, HostError)), key=lambda e: e.path)
    return PodLoad(summaries, errors, scheduler, count)


def _named_apart(summaries: list[HostSummary]) -> list[HostSummary]:
    """Hosts named apart as ``load_trace`` names them (``hosts_named_apart``). Each renamed
    summary's tables are renamed; ``stored_host`` keeps the name its cache and its per-step
    tables hold (they are renamed as they are read)."""
    ordered = sorted(summaries, key=lambda s: s.path)
    names = hosts_named_apart([(s.host, s.path) for s in ordered])
    for summary, name in zip(ordered, names, strict=True):
        summary.stored_host = summary.host
        if name != summary.host:
            summary.host = name
            model = summary.device
            if model is None:
                continue
            for table in ("devices", "ops", "utilization", "bottleneck_by_device", "lines"):
                frame = getattr(model, table)
                if frame is not None and "host" in frame.columns:
                    setattr(model, table, frame.assign(host=name))
            summary.ops = model.ops
    return summaries


def _failure(path: Path, error: BaseException) -> HostError:
    message = str(error) if isinstance(error, XlaprofError) else f"{path}: {error}"
    return HostError(host=host_from_filename(path), path=str(path), message=message)


def _run_local(
    files: Sequence[Path],
    first_step: int,
    workers: int,
    settings: tuple[bool, str, int | None, str | None],
    outcomes: list[HostSummary | HostError],
    advance: Callable[[], None],
) -> None:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    if workers <= 1 or len(files) == 1:
        for path in files:
            try:
                outcomes.append(summarize_capture(path, first_step, *settings))
            except Exception as error:
                outcomes.append(_failure(path, error))
            advance()
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {
            pool.submit(summarize_capture, path, first_step, *settings): path for path in files
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
    settings: tuple[bool, str, int | None, str | None],
    outcomes: list[HostSummary | HostError],
    advance: Callable[[], None],
    timeout_s: float,
) -> int:
    from xlaprof.errors import SchedulerError
    from xlaprof.inputs.pod import cluster as dask_client
    from xlaprof.inputs.pod.plain import decode, summarize_capture_plain

    def done(index: int, result: Any, error: BaseException | None) -> None:
        if error is not None:
            # a task that failed without answering (the worker answers a capture it cannot
            # read with its message): said in words, its exception never loaded
            raise SchedulerError(
                f"{scheduler}: no answer for {files[index]} ({type(error).__name__}); its "
                "workers must run the same xlaprof and see the captures at the same paths"
            )
        try:
            outcomes.append(decode(result))
        except ValueError as problem:
            raise SchedulerError(
                f"{scheduler}: a worker's answer for {files[index]} is not a host summary "
                f"({problem}); only plain data is read from a cluster"
            ) from None
        advance()

    cache, session, limit, root = settings
    keywords = {
        "first_step": first_step,
        "cache": cache,
        "session": session,
        "limit": limit,
        "cache_dir": root,
    }
    # every client call under one timeout; see dask_client for what is trusted
    paths = [str(p) for p in files]
    return dask_client.run(scheduler, summarize_capture_plain, paths, keywords, done, timeout_s)


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
