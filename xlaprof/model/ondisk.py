"""Per-step tables that a pod keeps on disk: read when a caller asks for every row.

A pod's per-step tables (host step bounds, per-device steps, host vs device per step, the
straggler rows, per-step bottlenecks) grow with hosts x steps; the workers write them beside
each host's event cache and the parent holds only aggregates (``xlaprof.model.stats``); the
first host's step timeline joins them the first time it is asked for.
``Trace.step_bounds`` and ``DeviceSummary.steps``/``.tracing``/``.bottleneck`` stay plain
attributes: on a pod, reading one reads every host's rows from disk (``OnDisk``), while the
analysis asks only for the first rows, a count or one host (``StepTables``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, overload

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

# The per-step tables a pod keeps on disk, by name.
STEP_BOUNDS = "step_bounds"  # host, step, start_ns, end_ns (Trace.step_bounds)
DEVICE_STEPS = "device_steps"  # DeviceSummary.steps
TRACING = "tracing"  # DeviceSummary.tracing
HOST_STEPS = "host_steps"  # HOST_STEP_COLUMNS: the straggler rows
BOTTLENECK = "bottleneck"  # DeviceSummary.bottleneck: per device and step, seconds per cause
TABLES = (STEP_BOUNDS, DEVICE_STEPS, TRACING, HOST_STEPS, BOTTLENECK)
# The host's step timeline from its events alone (``tables.timeline.trace_timeline``): what the
# pipeline shows of a pod's first host. Not a worker's: made the first time it is asked for,
# of that one host, and kept beside its cache, so that a later load reads it instead of the
# host's events (``CachedEvents.step_timeline``).
TIMELINE = "timeline"
OPTIONAL_TABLES = (TIMELINE,)


@dataclass
class StepRows:
    """Straggler rows (``HOST_STEPS``) as arrays, the columns stragglers and host skew read:
    per row its host and device (codes into ``hosts`` and ``devices``, the texts; -1: none),
    step, and wall, collective and own time (ms). A pod's parent reads them so, a range of
    steps at a time, with no frame between the files and the grouped reductions."""

    host: np.ndarray
    hosts: np.ndarray
    device: np.ndarray
    devices: np.ndarray
    step: np.ndarray
    wall_ms: np.ndarray
    collective_ms: np.ndarray
    own_ms: np.ndarray

    def __len__(self) -> int:
        return len(self.step)

    def take(self, rows: np.ndarray) -> StepRows:
        """These rows only (a mask or positions), the same texts."""
        return StepRows(
            self.host[rows],
            self.hosts,
            self.device[rows],
            self.devices,
            self.step[rows],
            self.wall_ms[rows],
            self.collective_ms[rows],
            self.own_ms[rows],
        )


# What reading an ``OnDisk`` attribute gives: a frame, or (a table that may be absent) None.
_Frame = TypeVar("_Frame", bound="pd.DataFrame | None")


class StepTables(Protocol):
    """Where a pod's per-step tables are (``xlaprof.model.pod.EventSource``)."""

    def table(
        self,
        name: str,
        hosts: list[str] | None = None,
        columns: list[str] | None = None,
        filters: Any = None,
    ) -> pd.DataFrame:
        """Rows of table ``name`` of ``hosts`` (every host by default), hosts in order."""
        ...

    def table_head(self, name: str, rows: int) -> pd.DataFrame:
        """The first ``rows`` rows of table ``name``, hosts in order (reads no more hosts)."""
        ...

    def table_rows(self, name: str) -> int:
        """How many rows table ``name`` has, over every host (nothing read)."""
        ...


class OnDisk(Generic[_Frame]):
    """A table attribute that, when not held in memory, is read from the object's ``via``.

    Used as a dataclass field's default: the field stays a constructor argument and an
    attribute. Set to a DataFrame it is that frame; set to None on an object whose attribute
    ``via`` (a ``StepTables``) is set, reading it reads every host's rows of table ``name``.
    ``required`` fields have no default; others default to None. The type parameter is what
    reading the attribute gives: ``pd.DataFrame`` for a required table (its rows, in memory or
    read), ``pd.DataFrame | None`` for one that may be absent.
    """

    def __init__(self, name: str, via: str, required: bool = True) -> None:
        self.name = name
        self.via = via
        self.required = required
        self.slot = ""

    def __set_name__(self, owner: type, attribute: str) -> None:
        self.slot = f"_{attribute}"

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> None: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> _Frame: ...

    def __get__(self, instance: object, owner: type | None = None) -> _Frame | None:
        if instance is None:  # the dataclass asks for the field's default
            if self.required:
                raise AttributeError(self.slot)
            return None
        held: _Frame | None = instance.__dict__.get(self.slot)
        tables = instance.__dict__.get(self.via)  # a StepTables, or None
        if held is None and tables is not None:
            held = tables.table(self.name)
        return held

    def __set__(self, instance: object, value: pd.DataFrame | None) -> None:
        instance.__dict__[self.slot] = value


def held(instance: Any, attribute: str) -> Any:
    """The frame ``instance.attribute`` holds in memory (None for one left on disk)."""
    return instance.__dict__.get(f"_{attribute}")
