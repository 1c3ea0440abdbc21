"""``xlaprof.load_trace``: profiler captures into pandas, with sessions, hosts, devices, steps.

Accepts one ``.xplane.pb`` or Chrome trace (``*trace.json``, ``*trace.json.gz``) file, a session
folder (``plugins/profile/<time>/``), a TensorBoard logdir, a run directory, or any folder of
captures. Captures are grouped into **sessions** (each ``plugins/profile/<time>/`` folder, or
each folder holding captures): one session is loaded, the latest by default (``session=`` to
choose); ``Trace.sessions`` lists them all. Sessions are never overlaid on one timeline.

Within a session each file is one host (named by ``XSpace.hostnames`` when set, else by the file
name); several files load in parallel worker processes. A file that is truncated, corrupt, empty
or not a capture is named in ``Trace.warnings`` and the others are analyzed; if every file is
bad, ``BadCapture`` is raised (its own exit code).

Step numbers: see ``xlaprof.tables.step_numbers`` (host markers) and ``xlaprof.tables.device``
(per-device steps, busy/idle, ops). Steps are counted from ``first_step`` (a run directory
knows where its trace window began). The device model is computed here, once, as the trace
loads: a ``Trace`` only holds what its loader put in it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from xlaprof.errors import BadCapture, XlaprofError
from xlaprof.inputs.captures import (
    device_table,
    embedded_protos,
    find_sessions,
    hlo_sources,
    insert_session,
    load_safely,
    name_hosts_apart,
    pick_session,
)
from xlaprof.model.device import DeviceSummary
from xlaprof.model.request import PodSettings
from xlaprof.model.trace import Trace
from xlaprof.tables import device as device_model
from xlaprof.tables.device.events import STATS_READ
from xlaprof.tables.host_steps import named_steps
from xlaprof.tables.step_numbers import assign_steps
from xlaprof.tables.step_times import step_times

if TYPE_CHECKING:
    import pandas as pd


# Public API (``xlaprof.load_trace``): each setting a keyword argument.
def load_trace(  # noqa: PLR0913
    path: str | os.PathLike[str],
    first_step: int | None = None,
    workers: int | None = None,
    session: str | None = None,
    lazy: bool | None = None,
    scheduler: str | None = None,
    max_size: int | None = None,
    device_windows: list[tuple[int, int, int]] | None = None,
    pod: PodSettings | None = None,
    host_windows: list[tuple[int, int, int]] | None = None,
    graphs: Sequence[object] | None = None,
    args: bool | frozenset[str] = True,
    read_only: bool = False,
) -> Trace:
    """Load one session's capture files at ``path`` into one DataFrame with ``step`` numbers;
    ``max_size`` caps each file (``--max-size``; None: each reader's own cap), in the worker
    processes too.

    ``device_windows``: (step, start, end) in Unix nanoseconds, where each step's device work
    lay (a run's executions, ``rundir.executions.device_windows``): the device tables read each
    step's device events there rather than in the host's step, which the device runs behind
    when the host runs ahead. Only for a capture with one host whose clock is known.
    ``host_windows``: the same, where each step's host wall lay (a run's step rows,
    ``rundir.executions.host_windows``): the host-vs-device table reads each step's host
    figures there, so its host wall is the row's ``wall_s`` (the trace's ``xlaprof_step`` span
    also holds the session's bookkeeping at the boundary); the steps' numbers stay the trace's.

    Several hosts load lazily (``xlaprof.inputs.pod``) when ``lazy`` is True, a dask
    ``scheduler`` is given, or (``lazy=None``) their files hold more than
    ``PodSettings.lazy_bytes``. ``pod``: how such a capture is read, as the environment set it
    (read at the edge, ``PodSettings.of``; ``xlaprof.load_trace`` reads it for its caller).
    ``graphs``: the run's compiled graphs where the caller holds them (the pipeline has the run
    loaded); None reads them from the run directory ``path`` is, if it is one.
    ``args``: which stats an xplane event's ``args`` keep: every one (True), or only those a
    set names and those the trace's own tables read (``tables.device.events.STATS_READ``, all
    the pipeline asks for); each other stat is ~13 bytes in memory, a 1 GB host's tens of
    millions of them. A pod's hosts keep no ``args`` either way (their cache has none).
    ``read_only``: for a caller that writes into none of ``events``' columns (the pipeline):
    a stat missing on every event is one read-only value every row views
    (``parse.xplane.frame.xspace_frame``).
    """
    root = Path(path)
    sessions = find_sessions(root)
    chosen, files = pick_session(sessions, root, session)
    if first_step is None:
        first_step = _first_step_from_run(root)
    # One file is never a pod (``wants_lazy``): the pod's modules (~0.1 s to import) only for
    # several.
    if len(files) > 1 and lazy is not False:
        from xlaprof.inputs import pod as pods

        if pods.wants_lazy(files, lazy, scheduler, pod):
            return pods.load_pod(
                files,
                first_step or 0,
                workers,
                scheduler,
                chosen,
                list(sessions),
                limit=max_size,
                settings=pod,
            )
    if isinstance(args, frozenset):  # the trace's own tables read these, whatever is asked
        args = args | STATS_READ
    loaded = _load_files(files, workers, max_size, args, read_only)
    broken = [item for item in loaded if isinstance(item, XlaprofError)]
    frames = [item for item in loaded if not isinstance(item, XlaprofError)]
    if not frames:
        if len(broken) == 1:
            raise broken[0]
        raise BadCapture(f"{root}: every capture file is unreadable ({broken[0]}; ...)")
    warnings = [f"{error} (skipped; the other hosts are analyzed)" for error in broken]
    warnings += [
        f"{frame.attrs.get('source')}: {frame.attrs['dropped_events']} events with times out "
        "of range were skipped (a damaged capture?)"
        for frame in frames
        if frame.attrs.get("dropped_events")
    ]
    name_hosts_apart(frames)
    starts = {
        str(frame["host"].iloc[0]): frame.attrs.get("profile_start_ns")
        for frame in frames
        if len(frame)
    }
    epochs = {
        str(frame["host"].iloc[0]): frame.attrs["epoch_offset_ns"]
        for frame in frames
        if len(frame) and isinstance(frame.attrs.get("epoch_offset_ns"), int)
    }
    devices = device_table(frames, chosen)
    protos = embedded_protos(frames)  # before the frames' attrs are dropped
    events = _session_events(frames, chosen)
    named = named_steps(events)
    ranges = None if named is None else named.ranges
    events["step"], bounds = assign_steps(events, first_step or 0, starts, ranges)
    bounds.insert(0, "session", chosen)
    on_device = _run_bounds(bounds, device_windows, epochs)
    on_host = _with_windows(bounds, host_windows, epochs)

    def summarize() -> DeviceSummary:
        # the device model, made when first asked for (``Trace.device_summary``), with the
        # instructions' source lines it places device time at (the embedded protos parsed
        # only then: a notebook that reads only ``events`` does not pay for them)
        held = _run_graphs(root) if graphs is None else list(graphs)
        sources = hlo_sources(protos, held)
        summary = device_model.summarize_host(events, devices, on_host, sources, on_device)
        summary.warnings = list(warnings)
        return summary

    return Trace(
        events=events,
        files=[f for f, i in zip(files, loaded, strict=True) if not isinstance(i, XlaprofError)],
        step_bounds=bounds,
        devices=devices,
        session=chosen,
        sessions=list(sessions),
        warnings=warnings,
        summarize=summarize,
        step_source=None if named is None else named.source,
        step_ranges=ranges,
        epoch_offset_ns=epochs,
        step_table=step_times,
    )


def _with_windows(
    bounds: pd.DataFrame, windows: list[tuple[int, int, int]] | None, epochs: dict[str, int]
) -> pd.DataFrame:
    """``bounds`` with the times of the steps ``windows`` has replaced by theirs
    (``_run_bounds``), the other steps' kept; ``bounds`` itself where it has none of them."""
    known = _run_bounds(bounds, windows, epochs)
    if known is None:
        return bounds
    merged = bounds.copy()
    merged.loc[known.index, ["start_ns", "end_ns"]] = known[["start_ns", "end_ns"]]
    return merged


def _run_bounds(
    bounds: pd.DataFrame, windows: list[tuple[int, int, int]] | None, epochs: dict[str, int]
) -> pd.DataFrame | None:
    """``windows`` (Unix ns) as step bounds on the capture's clock: ``bounds``' rows of the
    steps it has, their times replaced; None where there are none, or the capture has more
    than one host or no known clock."""
    import numpy as np

    if not windows or bounds.empty or len(epochs) != 1:
        return None
    ((_, epoch),) = epochs.items()
    found = {step: (start - epoch, end - epoch) for step, start, end in windows}
    steps = bounds["step"].to_numpy(dtype=np.int64)
    keep = np.array([int(step) in found for step in steps], dtype=bool)
    if not keep.any():
        return None
    chosen = bounds[keep].copy()
    times = [found[int(step)] for step in steps[keep]]
    chosen["start_ns"] = np.array([t[0] for t in times], dtype=np.int64)
    chosen["end_ns"] = np.array([t[1] for t in times], dtype=np.int64)
    return chosen


def _run_graphs(root: Path) -> list[object]:
    """A run directory's harvested graphs (for device time per line), else none."""
    from xlaprof.rundir.reader import find_runs, load_run

    if root.is_dir():
        runs = find_runs(root)
        if len(runs) == 1:
            return list(load_run(runs[0]).graphs())
    return []


def _load_files(
    files: list[Path],
    workers: int | None,
    limit: int | None,
    args: bool | frozenset[str],
    read_only: bool = False,
) -> list[pd.DataFrame | XlaprofError]:
    """Each file's events (several files in a process pool of ``workers``), or why not; a
    worker's frame comes back whole (pickled), ``read_only`` or not."""
    if len(files) == 1:
        return [load_safely(files[0], limit, args, read_only)]
    from concurrent.futures import ProcessPoolExecutor  # (multiprocessing: ~0.1 s to import)

    workers = workers or min(len(files), os.cpu_count() or 1)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(load_safely, files, [limit] * len(files), [args] * len(files)))


def _session_events(frames: list[pd.DataFrame], session: str) -> pd.DataFrame:
    """The hosts' events of one session as one frame: text columns categorical, and a
    ``session`` column first."""
    import pandas as pd  # after the files: a bad capture is reported without loading pandas

    events = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    events.attrs = {}
    for column in ("host", "plane", "plane_kind", "device", "line", "name"):
        if events[column].dtype != "category":
            events[column] = events[column].astype("category")
    for column in ("hlo_op", "hlo_module", "hlo_category", "program_id"):
        if events[column].dtype != "category":
            events[column] = events[column].astype("category")
    insert_session(events, session)
    return events


def _first_step_from_run(root: Path) -> int | None:
    """The first step of the trace window of the run directory ``root`` is, holds or lies in
    (a capture file or logdir inside a run: ``run/plugins/profile/<time>/host.xplane.pb``).

    Runs recorded since each step carries its number in the trace (``xlaprof_step``) need
    this only for StepMarker numbering of older runs.
    """
    from xlaprof.rundir.reader import find_runs, load_run
    from xlaprof.rundir.schema import RUN_JSON

    runs = find_runs(root) if root.is_dir() else []
    if not runs:  # inside a run directory: its trace window's files
        runs = [p for p in list(root.absolute().parents)[:4] if (p / RUN_JSON).is_file()][:1]
    if len(runs) != 1:
        return None
    try:
        window = load_run(runs[0]).info.trace_steps
    except XlaprofError:  # a damaged run: its capture still loads, numbered from 0
        return None
    return window[0] if window else None
