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

Step numbers: see ``xlaprof.analysis.steps`` (host markers) and ``xlaprof.analysis.device``
(per-device steps, busy/idle, ops). Steps are counted from ``first_step`` (a run directory
knows where its trace window began).

Longer than the ~350 lines a module here aims for: ``Trace`` and ``load_trace`` (sessions, hosts,
broken files, lazy pod captures) are the one entry point to traces and share their naming rules.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.analysis import device as device_model
from xlaprof.analysis.steps import assign_steps
from xlaprof.errors import BadCapture, InputNotFound, InputNotRecognized, XlaprofError
from xlaprof.parse.chrome_trace import chrome_trace_frame
from xlaprof.parse.xplane import host_from_filename, xspace_frame

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.analysis.pod import EventSource

XPLANE_SUFFIX = ".xplane.pb"
CHROME_SUFFIXES = ("trace.json", "trace.json.gz")
DEVICE_COLUMNS = [
    "session",
    "host",
    "plane",
    "device",
    "kind",
    "type",
    "vendor",
    "peak_flops_per_s",
    "peak_bytes_per_s",
]
STEP_TIME_COLUMNS = ["session", "host", "step", "start_ns", "end_ns", "wall_ms", "source", "device"]


@dataclass
class Trace:
    """Loaded trace events of one session: one or more hosts and their devices.

    For a many-host capture loaded lazily (``xlaprof.analysis.pod``), ``events`` is a dask
    DataFrame (one partition per host, read from Parquet caches), ``source`` is set and the
    device model comes from the hosts' workers: use ``select`` for a filtered pandas frame.
    """

    events: pd.DataFrame
    files: list[Path] = field(default_factory=list)
    # A capture starts and stops mid-step: its first and last step per host are partial.
    partial_edges: bool = False
    # session, host, step, start_ns, end_ns of each host step (boundaries, not event extents)
    step_bounds: pd.DataFrame | None = None
    # One row per device plane with events (DEVICE_COLUMNS): kind, type, peaks from plane stats.
    devices: pd.DataFrame | None = None
    # The session loaded, and every session found at the path (sorted, the latest last).
    session: str = ""
    sessions: list[str] = field(default_factory=list)
    # What was wrong with the capture (a broken host file, ...), one line each.
    warnings: list[str] = field(default_factory=list)
    _summary: device_model.HostSummary | None = field(default=None, repr=False)
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
        events = self.events[self.events["plane_kind"] == "host"]
        if names is not None:
            events = events[events["name"].isin(names)]
        grouped = events.groupby(["host", "step", "name"], observed=True)["duration_ns"]
        return grouped.agg(calls="count", total_ms=lambda d: d.sum() / 1e6).reset_index()

    def summary(self) -> device_model.HostSummary:
        """The device model of this trace (computed once): steps, ops, utilization, tracing."""
        if self._summary is None:
            self._summary = device_model.summarize_host(self.events, self.devices, self.step_bounds)
            self._summary.warnings = list(self.warnings)
        return self._summary

    def device_steps(self) -> pd.DataFrame:
        """Per device and step: session, host, device, step, start, wall, busy, idle (s),
        duty and seconds per category (``xlaprof.analysis.device``)."""
        return self.summary().steps

    def device_ops(self) -> pd.DataFrame:
        """Per device and op: name, category, occurrences, total and self time (s), FLOPs,
        bytes, achieved rates and roofline side (``xlaprof.analysis.device``)."""
        return self.summary().ops

    def device_utilization(self) -> pd.DataFrame:
        """Per device over the capture: span, busy, idle (s), duty cycle, how steps were found."""
        return self.summary().utilization

    def tracing_vs_device(self) -> pd.DataFrame:
        """Per host step: lazy-tensor tracing time against device busy time (tracing-bound?)."""
        return self.summary().tracing

    def step_times(self) -> pd.DataFrame:
        """Per host and step: start, end and wall time (ms), and where the step came from.

        Hosts with step markers: boundary to boundary (``source`` "host steps"). Hosts without:
        from their devices' own steps (``Steps`` line, else module executions), the slowest
        device of the host giving the step's time (``device`` names it). Devices' steps are
        never stitched together.
        """
        import pandas as pd

        parts = []
        bounds = self.step_bounds
        if bounds is not None and not bounds.empty:
            frame = bounds.copy()
            frame["wall_ms"] = (frame["end_ns"] - frame["start_ns"]) / 1e6
            if self.partial_edges:
                edges = frame.groupby("host", observed=True)["step"].agg(["min", "max"])
                first = frame["host"].map(edges["min"]).astype("Int64")
                last = frame["host"].map(edges["max"]).astype("Int64")
                frame = frame[(frame["step"] != first) & (frame["step"] != last)]
            frame["source"] = "host steps"
            frame["device"] = None
            parts.append(frame)
        marked = set() if bounds is None else set(bounds["host"].astype(str))
        steps = self.device_steps()
        steps = steps[
            ~steps["host"].astype(str).isin(marked)
            & steps["step"].notna()
            & (steps["step_source"] != "whole capture")
        ]
        if not steps.empty:
            slowest = steps.loc[steps.groupby(["session", "host", "step"])["wall_s"].idxmax()]
            parts.append(
                pd.DataFrame(
                    {
                        "session": slowest["session"],
                        "host": slowest["host"],
                        "step": slowest["step"],
                        "start_ns": slowest["start_ns"],
                        "end_ns": slowest["end_ns"],
                        "wall_ms": slowest["wall_s"] * 1e3,
                        "source": slowest["step_source"],
                        "device": slowest["device"],
                    }
                )
            )
        if not parts:
            return pd.DataFrame(columns=STEP_TIME_COLUMNS)
        result = pd.concat([p[STEP_TIME_COLUMNS] for p in parts], ignore_index=True)
        result["host"] = result["host"].astype(str).astype("category")
        result["step"] = result["step"].astype("Int64")
        return result.sort_values(["host", "step"], ignore_index=True)


def is_capture_file(path: Path) -> bool:
    """A ``.xplane.pb`` or a Chrome trace (``*trace.json``, ``*trace.json.gz``) by its name."""
    name = path.name
    return name.endswith(XPLANE_SUFFIX) or name.endswith(CHROME_SUFFIXES)


def session_of(file: Path, root: Path) -> str:
    """A capture's session: its ``plugins/profile/<session>`` folder, else its folder."""
    parts = file.parent.parts
    for index in range(len(parts) - 2):
        if parts[index] == "plugins" and parts[index + 1] == "profile":
            return parts[index + 2]
    if root.is_file():
        return ""
    relative = file.parent.relative_to(root)
    return "" if str(relative) == "." else relative.as_posix()


def find_sessions(path: Path) -> dict[str, list[Path]]:
    """Every session at or below ``path`` and its capture files (xplanes preferred).

    torch_xla writes ``host.xplane.pb`` and ``host.trace.json.gz`` side by side: where a
    session has xplanes, its Chrome traces are the same events and are left out.
    """
    path = Path(path)
    if not path.exists():
        raise InputNotFound(f"{path}: no such file or directory")
    if path.is_file():
        if not is_capture_file(path):
            raise InputNotRecognized(
                f"{path}: not a trace file (*.xplane.pb, *trace.json, *trace.json.gz)"
            )
        return {session_of(path, path): [path]}
    sessions: dict[str, list[Path]] = {}
    for file in sorted(p for p in path.rglob("*") if p.is_file() and is_capture_file(p)):
        sessions.setdefault(session_of(file, path), []).append(file)
    for name, files in sessions.items():
        xplanes = [f for f in files if f.name.endswith(XPLANE_SUFFIX)]
        sessions[name] = xplanes or files
    if not sessions:
        raise InputNotRecognized(
            f"{path}: no trace here (*.xplane.pb or *trace.json.gz, e.g. under "
            "plugins/profile/); capture one with `xlaprof run --trace-steps A:B` or "
            "`xlaprof capture`"
        )
    return dict(sorted(sessions.items()))


def trace_files(path: Path, session: str | None = None) -> list[Path]:
    """The capture files of one session at ``path`` (the latest unless ``session`` is given)."""
    return _pick(find_sessions(Path(path)), Path(path), session)[1]


def _pick(
    sessions: dict[str, list[Path]], root: Path, session: str | None
) -> tuple[str, list[Path]]:
    if session is None:
        name = list(sessions)[-1]
        return name, sessions[name]
    if session in sessions:
        return session, sessions[session]
    found = ", ".join(name or "." for name in sessions)
    raise InputNotRecognized(f"{root}: no session {session!r} here (sessions: {found})")


def _load_one(path: Path, args: bool = True) -> pd.DataFrame:
    """One capture file's events; ``args=False`` skips the per-event stat dicts of an xplane
    (a pod worker's cache has no ``args`` column, and building them is a third of the parse)."""
    if path.name.endswith(XPLANE_SUFFIX):
        frame = xspace_frame(path, args=args)
    else:
        frame = chrome_trace_frame(path)
    frame.attrs["source"] = str(path)
    return frame


def _load_safely(path: Path) -> pd.DataFrame | XlaprofError:
    try:
        return _load_one(path)
    except XlaprofError as error:  # one host's problem: a warning when others load
        return error
    except (RecursionError, MemoryError) as error:
        return BadCapture(f"{path}: {type(error).__name__} while reading it (skipped)")


def load_trace(
    path: str | os.PathLike[str],
    first_step: int | None = None,
    workers: int | None = None,
    session: str | None = None,
    lazy: bool | None = None,
    scheduler: str | None = None,
) -> Trace:
    """Load one session's capture files at ``path`` into one DataFrame with ``step`` numbers.

    Several hosts load lazily (``xlaprof.analysis.pod``) when ``lazy`` is True, a dask
    ``scheduler`` is given, or (``lazy=None``) their files hold more than ``pod.LAZY_BYTES``.
    """
    from xlaprof.analysis import pod

    root = Path(path)
    sessions = find_sessions(root)
    chosen, files = _pick(sessions, root, session)
    if first_step is None:
        first_step = _first_step_from_run(root)
    if pod.wants_lazy(files, lazy, scheduler):
        return pod.load_pod(files, first_step or 0, workers, scheduler, chosen, list(sessions))
    if len(files) == 1:
        loaded = [_load_safely(files[0])]
    else:
        workers = workers or min(len(files), os.cpu_count() or 1)
        with ProcessPoolExecutor(max_workers=workers) as pool:
            loaded = list(pool.map(_load_safely, files))
    broken = [item for item in loaded if isinstance(item, XlaprofError)]
    frames = [item for item in loaded if not isinstance(item, XlaprofError)]
    if not frames:
        if len(broken) == 1:
            raise broken[0]
        raise BadCapture(f"{root}: every capture file is unreadable ({broken[0]}; ...)")
    import pandas as pd  # after the files: a bad capture is reported without loading pandas

    warnings = [f"{error} (skipped; the other hosts are analyzed)" for error in broken]
    warnings += [
        f"{frame.attrs.get('source')}: {frame.attrs['dropped_events']} events with times out "
        "of range were skipped (a damaged capture?)"
        for frame in frames
        if frame.attrs.get("dropped_events")
    ]
    _name_hosts_apart(frames, files, warnings)
    starts = {
        str(frame["host"].iloc[0]): frame.attrs.get("profile_start_ns")
        for frame in frames
        if len(frame)
    }
    devices = _device_table(frames, chosen)
    events = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    events.attrs = {}
    for column in ("host", "plane", "plane_kind", "device", "line", "name"):
        if events[column].dtype != "category":
            events[column] = events[column].astype("category")
    for column in ("hlo_op", "hlo_module", "hlo_category", "program_id"):
        if events[column].dtype != "category":
            events[column] = events[column].astype("category")
    events.insert(0, "session", pd.Categorical([chosen] * len(events)))
    events["step"], bounds = assign_steps(events, first_step or 0, starts)
    bounds.insert(0, "session", chosen)
    return Trace(
        events=events,
        files=[f for f, i in zip(files, loaded, strict=True) if not isinstance(i, XlaprofError)],
        step_bounds=bounds,
        devices=devices,
        session=chosen,
        sessions=list(sessions),
        warnings=warnings,
    )


def _name_hosts_apart(frames: list[pd.DataFrame], files: list[Path], warnings: list[str]) -> None:
    """Hosts are named by ``XSpace.hostnames``; where two files name the same host (two
    processes of one machine, or copies), those files are named by their file names instead."""
    import pandas as pd

    named = [(frame, str(frame["host"].iloc[0])) for frame in frames if len(frame)]
    counts: dict[str, int] = {}
    for _, host in named:
        counts[host] = counts.get(host, 0) + 1
    taken: set[str] = set()
    for frame, host in named:
        name = host
        if counts[host] > 1:
            source = frame.attrs.get("source")
            name = host_from_filename(Path(source)) if source else host
        while name in taken:
            name = f"{name}#2" if "#" not in name else f"{name}+"
        taken.add(name)
        if name != host:
            frame["host"] = pd.Categorical([name] * len(frame))


def _device_table(frames: list[pd.DataFrame], session: str) -> pd.DataFrame:
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for frame in frames:
        if not len(frame):
            continue
        host = str(frame["host"].iloc[0])
        infos = frame.attrs.get("devices") or []
        rows += [{"session": session, "host": host, **info} for info in infos]
    table = pd.DataFrame(rows, columns=DEVICE_COLUMNS)
    return table


def _first_step_from_run(root: Path) -> int | None:
    from xlaprof.rundir.reader import find_runs, load_run

    if root.is_dir() and find_runs(root):
        runs = find_runs(root)
        if len(runs) == 1:
            window = load_run(runs[0]).info.trace_steps
            return window[0] if window else None
    return None
