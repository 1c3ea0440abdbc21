"""A loaded capture: its events, hosts, devices and steps, and the device model made of them.

``Trace`` is what ``xlaprof.load_trace`` returns (loading lives in ``xlaprof.inputs.traces``,
the tables in ``xlaprof.tables``): one session of one or more hosts. Its methods only read what
the loader put in it; nothing here reads files or computes a table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from xlaprof.model.ondisk import BOTTLENECK, STEP_BOUNDS, TRACING, OnDisk, held

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.model.device import DeviceSummary
    from xlaprof.model.pod import EventSource

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
DEVICE_STEP_TIME_COLUMNS = [
    "session",
    "host",
    "device",
    "step",
    "start_ns",
    "end_ns",
    "wall_ms",
    "busy_ms",
    "source",
]
# A pod's host step bounds, read from its hosts' files when asked for (``model.ondisk``).
_STEP_BOUNDS: OnDisk[pd.DataFrame | None] = OnDisk(STEP_BOUNDS, via="source", required=False)
_ON_DISK = {"tracing": TRACING, "bottleneck": BOTTLENECK}


class EventFilters(TypedDict, total=False):
    """``Trace.select``'s filters, as ``select_frame`` and ``EventSource.select`` take them."""

    steps: Sequence[int] | None
    start_ns: int | None
    end_ns: int | None
    names: Sequence[str] | None
    plane_kinds: Sequence[str] | None
    columns: Sequence[str] | None


@dataclass
class Trace:
    """Loaded trace events of one session: one or more hosts and their devices.

    ``xlaprof.load_trace`` makes one (``xlaprof.inputs.traces``) and computes its device model
    once, as it loads (``device_summary``): the per-device steps, ops, utilization and tracing
    tables that ``device_steps()`` and the rest return. For a many-host capture loaded lazily
    (``xlaprof.inputs.pod``), ``events`` is a dask DataFrame (one partition per host, read from
    Parquet caches), ``source`` is set and the device model comes from the hosts' workers: use
    ``select`` for a filtered pandas frame.
    """

    events: pd.DataFrame
    files: list[Path] = field(default_factory=list)
    # A capture starts and stops mid-step: its first and last step per host are partial.
    partial_edges: bool = False
    # session, host, step, start_ns, end_ns of each host step (boundaries, not event extents);
    # a pod's are read from its hosts' files when asked for (``model.ondisk``)
    step_bounds: OnDisk[pd.DataFrame | None] = _STEP_BOUNDS
    # One row per device plane with events (DEVICE_COLUMNS): kind, type, peaks from plane stats.
    devices: pd.DataFrame | None = None
    # The session loaded, and every session found at the path (sorted, the latest last).
    session: str = ""
    sessions: list[str] = field(default_factory=list)
    # What was wrong with the capture (a broken host file, ...), one line each.
    warnings: list[str] = field(default_factory=list)
    # The device model of these events (``xlaprof.tables.device.summarize``), set by the loader.
    device_summary: DeviceSummary | None = field(default=None, repr=False)
    source: EventSource | None = None
    # Steps found from range names (``tables.host_steps``: ``ProfilerStep``, ``step_N``,
    # record_function ranges) where the capture numbers none: how, and the ranges (host, step,
    # start_ns, end_ns, line); None where the capture marks its own steps.
    step_source: str | None = None
    step_ranges: pd.DataFrame | None = field(default=None, repr=False)
    # Per host, what to add to its times for epoch nanoseconds, where the capture says
    # (Kineto's ``baseTimeNanoseconds``): how other logs' wall-clock times are placed in steps.
    epoch_offset_ns: dict[str, int] = field(default_factory=dict)

    @property
    def hosts(self) -> list[str]:
        if self.source is not None:
            return self.source.hosts
        return sorted(self.events["host"].cat.categories)

    @property
    def event_count(self) -> int:
        """How many events the trace holds (a pod's: counted by its workers, nothing read)."""
        if self.source is not None:
            return self.source.event_count
        return len(self.events)

    def select(
        self, hosts: Sequence[str] | None = None, **filters: Unpack[EventFilters]
    ) -> pd.DataFrame:
        """Events of ``hosts`` (all by default), filtered before they are read when lazy.

        Filters: ``steps``, ``start_ns``/``end_ns`` (overlapping the window), ``names``,
        ``plane_kinds``, ``columns`` (see ``pod.EventSource.select``).
        """
        if self.source is not None:
            return self.source.select(hosts, **filters)
        return select_frame(self.events, hosts, **filters)

    def regions(self, names: Sequence[str] | None = None) -> pd.DataFrame:
        """Host events by name and step: count and total duration (ms)."""
        events = self.events[self.events["plane_kind"] == "host"]
        if names is not None:
            events = events[events["name"].isin(names)]
        grouped = events.groupby(["host", "step", "name"], observed=True)["duration_ns"]
        return grouped.agg(calls="count", total_ms=lambda d: d.sum() / 1e6).reset_index()

    def summary(self) -> DeviceSummary:
        """The device model of this trace: steps, ops, utilization, tracing."""
        if self.device_summary is None:
            raise ValueError("this Trace has no device model: load it with xlaprof.load_trace")
        return self.device_summary

    def device_steps(self) -> pd.DataFrame:
        """Per device and step: session, host, device, step, start, wall, busy, idle (s),
        duty and seconds per category (``xlaprof.tables.device``)."""
        return self.summary().steps

    def device_ops(self) -> pd.DataFrame:
        """Per device and op: name, category, occurrences, total and self time (s), FLOPs,
        bytes, achieved rates and roofline side (``xlaprof.tables.device``)."""
        return self.summary().ops

    def device_utilization(self) -> pd.DataFrame:
        """Per device over the capture: span, busy, idle (s), duty cycle, how steps were found."""
        return self.summary().utilization

    def tracing_vs_device(self, hosts: Sequence[str] | None = None) -> pd.DataFrame:
        """Per host step: lazy-tensor tracing time against device busy time (tracing-bound?).

        ``hosts``: those hosts' rows only (a pod reads only their files)."""
        return self._of_hosts("tracing", hosts)

    def device_time_by_line(self, per_device: bool = False) -> pd.DataFrame:
        """Device op time (self time) per user source line, from the HLO the capture embeds.

        Summed over devices: file, line, function, seconds, share of all op time, executions,
        the op with the most time there, the programs (``modules``) and categories it ran in;
        the row with no ``file`` is op time no user line was found for. ``per_device``: one
        row per session, host, device, category and line (``xlaprof.tables.device.lines``).
        Empty where the capture carries no HLO sources.
        """
        import pandas as pd

        summary = self.summary()
        table = summary.lines if per_device else summary.line_totals
        return pd.DataFrame() if table is None else table

    def bottlenecks(self, hosts: Sequence[str] | None = None) -> pd.DataFrame:
        """Per device and step: seconds per cause (compute, memory-bound ops, collectives,
        async waits, infeed/outfeed, input transfers and input, compilation, tracing, host) and
        the one that bounds the step, with its share (``xlaprof.tables.device.bottleneck``).

        ``hosts``: those hosts' rows only (a pod reads only their files)."""
        return self._of_hosts("bottleneck", hosts)

    def _of_hosts(self, name: str, hosts: Sequence[str] | None) -> pd.DataFrame:
        """The device model's per-step table ``name``, every host's or ``hosts``'."""
        import pandas as pd

        summary = self.summary()
        if hosts is not None and summary.tables is not None and held(summary, name) is None:
            return summary.tables.table(_ON_DISK[name], hosts=list(hosts))
        table: pd.DataFrame | None = getattr(summary, name)  # tracing or bottleneck
        if table is None:
            return pd.DataFrame()
        if hosts is not None:
            table = table[table["host"].astype(str).isin([str(h) for h in hosts])]
        return table

    def step_times(self, per_device: bool = False) -> pd.DataFrame:
        """Per host and step: start, end and wall time (ms), and where the step came from.

        Hosts with step markers: boundary to boundary (``source`` "host steps"). Hosts without:
        from their devices' own steps (``Steps`` line, else module executions), the slowest
        device of the host giving the step's time (``device`` names it). Devices' steps are
        never stitched together.

        ``per_device``: one row per device and step instead (``DEVICE_STEP_TIME_COLUMNS``):
        each device's own steps, with its busy time, from whichever source it has (a device
        with no steps at all has one "whole capture" row, step <NA>).
        """
        import pandas as pd

        if per_device:
            steps = self.device_steps()
            if steps.empty:
                return pd.DataFrame(columns=DEVICE_STEP_TIME_COLUMNS)
            table = steps.assign(
                wall_ms=steps["wall_s"] * 1e3,
                busy_ms=steps["busy_s"] * 1e3,
                source=steps["step_source"],
            )[DEVICE_STEP_TIME_COLUMNS]
            return table.sort_values(["host", "device", "start_ns"], ignore_index=True)

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
