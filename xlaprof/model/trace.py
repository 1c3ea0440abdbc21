"""A loaded capture: its events, hosts, devices and steps, and the device model made of them.

``Trace`` is what ``xlaprof.load_trace`` returns (loading lives in ``xlaprof.inputs.traces``,
the tables in ``xlaprof.tables``): one session of one or more hosts. Its methods only read what
the loader put in it; nothing here reads files or computes a table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack, overload

from xlaprof.model.ondisk import BOTTLENECK, STEP_BOUNDS, TRACING, OnDisk, StepRows

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.model.device import DeviceSummary
    from xlaprof.model.rowstore import RowStore

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
class HostTables:
    """A several-host trace's per-host tables: host skew per step, the straggler rows
    (HOST_STEP_COLUMNS; None where they stay on disk: ``EventSource.row_store``) and the
    stragglers per step and device."""

    skew: pd.DataFrame
    host_steps: pd.DataFrame | None
    stragglers: pd.DataFrame


class HostTableMaker(Protocol):
    """Makes ``HostTables`` (``xlaprof.inputs.pod``): from events held in memory, or from a
    pod's straggler rows read a range of steps at a time."""

    @property
    def chunk_rows(self) -> int:
        """The most straggler rows read at once."""
        ...

    def of_events(self, trace: Trace) -> HostTables:
        """From ``trace``'s events and step tables, held in memory."""
        ...

    def of_chunks(
        self, marked: set[str], chunks: Iterable[StepRows], edges: Mapping[str, tuple[int, int]]
    ) -> HostTables:
        """From straggler rows read a range of steps at a time, as arrays (``marked``: the
        hosts with step markers; ``edges``: per host the first and last host step to leave out
        of host skew, as ``Trace.step_times`` leaves them out, none where it keeps them)."""
        ...


class EventSource(Protocol):
    """Where a ``Trace``'s events and per-step tables are: held in memory (``HeldEvents``) or
    left in a pod's per-host caches until asked for (``xlaprof.model.pod.CachedEvents``).

    What differs between the two is answered here, so nothing that reads a trace asks which
    kind it has: every member answers with a value of its type (an empty frame, record or
    store where there is nothing to give), never None."""

    @property
    def hosts(self) -> list[str]:
        """The hosts, sorted."""
        ...

    @property
    def event_count(self) -> int:
        """How many events (a pod's: counted by its workers, nothing read)."""
        ...

    def select(
        self, hosts: Sequence[str] | None = None, **filters: Unpack[EventFilters]
    ) -> pd.DataFrame:
        """The events of ``hosts`` that match ``filters``, as pandas."""
        ...

    def held_events(self) -> pd.DataFrame:
        """The events held in memory, as one pandas frame: every event of a trace held here;
        none (an empty frame) of a pod, whose events stay in its hosts' caches (work over all
        of a pod's events is not worth reading them for)."""
        ...

    def load_record(self, trace: Trace) -> dict[str, Any]:
        """How the hosts were read by workers, for ``--json`` (``PodLoad.record``; empty when
        read in this process); its per-host step figures of the steps ``trace`` (whose source
        this is) keeps in its step times."""
        ...

    def step_view(self, trace: Trace, columns: Sequence[str] | None = None) -> Trace:
        """What the step timeline and the story read of ``trace`` (whose source this is): the
        trace itself when held, a pod's first host read from its own files (its events'
        ``columns`` only, where given)."""
        ...

    def step_hosts(self, trace: Trace) -> list[str]:
        """The hosts whose events ``step_view`` reads: every host of a trace held here, a pod's
        first host."""
        ...

    def step_timeline(self, trace: Trace, make: Callable[[Trace], pd.DataFrame]) -> pd.DataFrame:
        """The step timeline of ``trace`` (whose source this is) from its events alone:
        ``make(trace)`` (``tables.timeline.trace_timeline`` of its ``step_view``) for a trace
        held here; a pod's first host's as kept beside its cache, else made by ``make`` and
        kept there (once per pod: the next load reads it instead of the events)."""
        ...

    def host_tables(self, trace: Trace, maker: HostTableMaker) -> HostTables:
        """``trace``'s host tables, made by ``maker`` from wherever the rows are."""
        ...

    def row_store(self) -> RowStore:
        """Where the per-step tables left on disk are (empty: every row is held in memory)."""
        ...


class HeldEvents:
    """A trace's events held in memory: ``Trace.events``, a pandas frame."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    @property
    def hosts(self) -> list[str]:
        return sorted(self.trace.events["host"].cat.categories)

    @property
    def event_count(self) -> int:
        return len(self.trace.events)

    def select(
        self, hosts: Sequence[str] | None = None, **filters: Unpack[EventFilters]
    ) -> pd.DataFrame:
        return select_frame(self.trace.events, hosts, **filters)

    def held_events(self) -> pd.DataFrame:
        return self.trace.events

    def load_record(self, trace: Trace) -> dict[str, Any]:
        return {}

    def step_view(self, trace: Trace, columns: Sequence[str] | None = None) -> Trace:
        return trace

    def step_hosts(self, trace: Trace) -> list[str]:
        return list(trace.hosts)

    def step_timeline(self, trace: Trace, make: Callable[[Trace], pd.DataFrame]) -> pd.DataFrame:
        return make(trace)

    def host_tables(self, trace: Trace, maker: HostTableMaker) -> HostTables:
        return maker.of_events(trace)

    def row_store(self) -> RowStore:
        from xlaprof.model.rowstore import RowStore

        return RowStore()


class _Summary:
    """The ``device_summary`` attribute: the device model given to the constructor (a pod's,
    from its hosts' workers), or made by ``summarize`` the first time it is read and kept.
    A dataclass field's default (``None``), as ``OnDisk`` is."""

    def __set_name__(self, owner: type, attribute: str) -> None:
        self.slot = f"_{attribute}"

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> None: ...

    @overload
    def __get__(self, instance: Trace, owner: type | None = None) -> DeviceSummary | None: ...

    def __get__(self, instance: Trace | None, owner: type | None = None) -> DeviceSummary | None:
        if instance is None:  # the dataclass asks for the field's default
            return None
        value: DeviceSummary | None = instance.__dict__.get(self.slot)
        make = instance.summarize
        if value is None and make is not None:
            value = make()
            instance.__dict__[self.slot] = value
            instance.summarize = None  # what it held (the events) is no longer needed by it
        return value

    def __set__(self, instance: Trace, value: DeviceSummary | _Summary | None) -> None:
        # the constructor passes the field's default (this descriptor) where none was given
        instance.__dict__[self.slot] = None if isinstance(value, _Summary) else value


@dataclass
class Trace:
    """Loaded trace events of one session: one or more hosts and their devices.

    ``xlaprof.load_trace`` makes one (``xlaprof.inputs.traces``); its device model
    (``device_summary``: the per-device steps, ops, utilization and tracing tables that
    ``device_steps()`` and the rest return) is computed once, the first time it is asked for
    (``summarize``), so a notebook that reads only ``events`` does not pay for it. For a
    many-host capture loaded lazily (``xlaprof.inputs.pod``), ``events`` is a dask DataFrame
    (one partition per host, read from Parquet caches), ``source`` is set and the device model
    comes from the hosts' workers: use
    ``select`` for a filtered pandas frame. ``events_source`` is where the events are, either
    way (``EventSource``).
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
    # The device model of these events (``xlaprof.tables.device.summarize``): given, or made by
    # ``summarize`` (set by the loader) when first read.
    device_summary: _Summary = field(default=_Summary(), repr=False, compare=False)
    summarize: Callable[[], DeviceSummary] | None = field(default=None, repr=False, compare=False)
    # A pod's per-host caches (``xlaprof.model.pod.CachedEvents``), as its loader gives them;
    # None for events held in ``events``.
    source: EventSource | None = None
    # Steps found from range names (``tables.host_steps``: ``ProfilerStep``, ``step_N``,
    # record_function ranges) where the capture numbers none: how, and the ranges (host, step,
    # start_ns, end_ns, line); None where the capture marks its own steps.
    step_source: str | None = None
    step_ranges: pd.DataFrame | None = field(default=None, repr=False)
    # Per host, what to add to its times for epoch nanoseconds, where the capture says
    # (Kineto's ``baseTimeNanoseconds``): how other logs' wall-clock times are placed in steps.
    epoch_offset_ns: dict[str, int] = field(default_factory=dict)
    # The step-times table (``xlaprof.tables.step_times.step_times``), set by the loader.
    step_table: Callable[[Trace, bool], pd.DataFrame] | None = field(default=None, repr=False)
    # Where the events are, whichever kind: ``source``, or the events held here.
    events_source: EventSource = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.events_source = self.source or HeldEvents(self)

    @property
    def hosts(self) -> list[str]:
        return self.events_source.hosts

    @property
    def event_count(self) -> int:
        """How many events the trace holds (a pod's: counted by its workers, nothing read)."""
        return self.events_source.event_count

    def select(
        self, hosts: Sequence[str] | None = None, **filters: Unpack[EventFilters]
    ) -> pd.DataFrame:
        """Events of ``hosts`` (all by default), filtered before they are read when lazy.

        Filters: ``steps``, ``start_ns``/``end_ns`` (overlapping the window), ``names``,
        ``plane_kinds``, ``columns`` (see ``pod.CachedEvents.select``).
        """
        return self.events_source.select(hosts, **filters)

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
        if hosts is not None and summary.tables is not None and summary.on_disk(name):
            return summary.tables.table(_ON_DISK[name], hosts=list(hosts))
        table: pd.DataFrame | None = getattr(summary, name)  # tracing or bottleneck
        if table is None:
            return pd.DataFrame()
        if hosts is not None:
            table = table[table["host"].astype(str).isin([str(h) for h in hosts])]
        return table

    def step_times(self, per_device: bool = False) -> pd.DataFrame:
        """Per host and step: start, end and wall time (``wall_s``, and ``wall_ms`` as before),
        and where the step came from (``xlaprof.tables.step_times``, given by the loader).

        ``per_device``: one row per device and step instead, with its busy time."""
        if self.step_table is None:
            raise ValueError("this Trace has no step times: load it with xlaprof.load_trace")
        return self.step_table(self, per_device)

    def step_view(self, columns: Sequence[str] | None = None) -> Trace:
        """The trace the step timeline and the story read (``EventSource.step_view``; a pod's
        first host with its events' ``columns`` only, where given)."""
        return self.events_source.step_view(self, columns)

    def host_tables(self, maker: HostTableMaker) -> HostTables:
        """Host skew, straggler rows and stragglers of a several-host trace, made by ``maker``
        from wherever this trace's rows are (``EventSource.host_tables``)."""
        return self.events_source.host_tables(self, maker)


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
