"""Per-step figures as aggregates a parent can merge: what a pod's workers send back instead of
their per-step rows (which stay on disk: ``xlaprof.model.ondisk``).

``Digest`` is a fixed histogram of a column (bins of 1/64 octave, so ~1.1% wide) with its
count, sum, sum of squares, minimum and maximum: mergeable by adding bins, and enough to find
which bin holds any rank, so an exact median reads only that bin's values back from disk
(``Digest.value_at``). ``StepAggregates`` is one host's: per device its numbered steps (count,
digests of wall, busy and idle time, the slowest step, the steps with autotuning), the host vs
device table's counts and digests, and its host steps' wall time (digest, top-k slowest).
Everything here is plain data that round-trips through JSON (the cache's metadata).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

BINS_PER_OCTAVE = 64
ZERO_BIN = -(2**31)  # values <= 0
TOP_STEPS = 5  # slowest host steps kept per host
AUTOTUNE_STEPS = 9  # smallest step numbers with autotuning kept per device (8 shown, "...")


def _fields(record: Any) -> dict[str, Any]:
    """A dataclass's fields by name, in order, not copied (``dataclasses.asdict`` deep-copies
    every value; the ``to_json`` methods copy what they keep of a mutable one)."""
    return {item.name: getattr(record, item.name) for item in fields(record)}


def bin_keys(values: np.ndarray) -> np.ndarray:
    """Each value's bin (values must not be NaN)."""
    positive = values > 0
    keys = np.full(len(values), ZERO_BIN, np.int64)
    with np.errstate(divide="ignore"):
        keys[positive] = np.floor(np.log2(values[positive]) * BINS_PER_OCTAVE).astype(np.int64)
    return keys


def bin_range(key: int) -> tuple[float, float]:
    """The values a bin may hold, widened by a hair (``bin_keys`` decides at the edges)."""
    if key == ZERO_BIN:
        return -math.inf, 0.0
    low = 2.0 ** (key / BINS_PER_OCTAVE)
    high = 2.0 ** ((key + 1) / BINS_PER_OCTAVE)
    return low * (1 - 1e-9), high * (1 + 1e-9)


@dataclass
class Digest:
    """A column's histogram and moments (NaN values left out, as pandas' median does)."""

    count: int = 0
    total: float = 0.0
    total_sq: float = 0.0
    low: float | None = None
    high: float | None = None
    bins: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, values: Any) -> Digest:
        array = np.asarray(values, dtype=np.float64)
        array = array[~np.isnan(array)]
        if not len(array):
            return cls()
        keys, counts = np.unique(bin_keys(array), return_counts=True)
        return cls(
            count=len(array),
            total=float(array.sum()),
            total_sq=float(np.square(array).sum()),
            low=float(array.min()),
            high=float(array.max()),
            bins=dict(zip(keys.tolist(), counts.tolist(), strict=True)),
        )

    @classmethod
    def merged(cls, digests: Iterable[Digest]) -> Digest:
        out = cls()
        for digest in digests:
            if not digest.count:
                continue
            out.count += digest.count
            out.total += digest.total
            out.total_sq += digest.total_sq
            out.low = digest.low if out.low is None else min(out.low, digest.low or 0.0)
            out.high = digest.high if out.high is None else max(out.high, digest.high or 0.0)
            for key, count in digest.bins.items():
                out.bins[key] = out.bins.get(key, 0) + count
        return out

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    @property
    def std(self) -> float | None:
        """Population standard deviation."""
        if not self.count:
            return None
        mean = self.total / self.count
        return math.sqrt(max(self.total_sq / self.count - mean * mean, 0.0))

    def locate(self, rank: int) -> tuple[int, int]:
        """The bin holding the ``rank``-th smallest value (from 0) and its rank within it."""
        seen = 0
        for key in sorted(self.bins):
            count = self.bins[key]
            if rank < seen + count:
                return key, rank - seen
            seen += count
        raise IndexError(rank)

    def approximate(self, quantile: float) -> float | None:
        """A quantile to within one bin (~1.1%): the middle of its bin, clamped to the range."""
        if not self.count:
            return None
        key, _ = self.locate(min(int(quantile * self.count), self.count - 1))
        if key == ZERO_BIN:
            return self.low
        value = math.pow(2.0, (key + 0.5) / BINS_PER_OCTAVE)
        return min(max(value, self.low or value), self.high or value)

    def value_at(self, rank: int, read: Callable[[float, float], np.ndarray]) -> float:
        """The exact ``rank``-th smallest value: ``read(low, high)`` returns every value in
        that range (from disk); only those in the rank's bin are sorted."""
        key, within = self.locate(rank)
        values = np.asarray(read(*bin_range(key)), dtype=np.float64)
        values = values[~np.isnan(values)]
        values = np.sort(values[bin_keys(values) == key])
        return float(values[within])

    def median(self, read: Callable[[float, float], np.ndarray]) -> float | None:
        """The exact median (the mean of the two middle values for an even count, as pandas)."""
        if not self.count:
            return None
        if self.count % 2:
            return self.value_at(self.count // 2, read)
        middle = [self.value_at(self.count // 2 - 1, read), self.value_at(self.count // 2, read)]
        return float(np.mean(middle))

    def to_json(self) -> dict[str, Any]:
        return {**_fields(self), "bins": [[k, v] for k, v in sorted(self.bins.items())]}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> Digest:
        return cls(**{**record, "bins": {int(k): int(v) for k, v in record["bins"]}})


@dataclass
class DeviceStepStats:
    """One device's numbered steps on one host (``DeviceSummary.steps`` rows with a step)."""

    device: str
    steps: int
    source: str | None
    wall: Digest
    busy: Digest
    idle: Digest
    slowest_s: float | None
    slowest_step: int | None
    autotune_steps: list[int]

    def to_json(self) -> dict[str, Any]:
        record = _fields(self)
        for name in ("wall", "busy", "idle"):
            record[name] = getattr(self, name).to_json()
        record["autotune_steps"] = list(self.autotune_steps)
        return record

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> DeviceStepStats:
        digests = {name: Digest.from_json(record[name]) for name in ("wall", "busy", "idle")}
        return cls(**{**record, **digests})


@dataclass
class TracingStats:
    """The host vs device table (``DeviceSummary.tracing``) of one host, or merged."""

    rows: int = 0
    known: int = 0  # rows with a verdict (``bound``)
    bounds: dict[str, int] = field(default_factory=dict)  # verdict -> rows
    lazy: bool = False  # any row about lazy tracing (a torch_xla capture)
    lazy_known: bool = False  # any row with a verdict about lazy tracing
    busy: Digest = field(default_factory=Digest)  # device_busy_s of rows with a verdict
    tracing: Digest = field(default_factory=Digest)  # host_busy_s of rows with a verdict
    idle: Digest = field(default_factory=Digest)  # device_idle_s of rows with a verdict

    def to_json(self) -> dict[str, Any]:
        record = _fields(self)
        for name in ("busy", "tracing", "idle"):
            record[name] = getattr(self, name).to_json()
        record["bounds"] = dict(self.bounds)
        return record

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> TracingStats:
        digests = {name: Digest.from_json(record[name]) for name in ("busy", "tracing", "idle")}
        return cls(**{**record, **digests})


@dataclass
class StepWalls:
    """Some of one host's host-step wall times (ms): a digest, the extremes and the slowest
    steps (none of them where it has no such step: an empty digest, None, [])."""

    wall: Digest
    fastest_step: int | None
    slowest_step: int | None
    slowest: list[tuple[int, float]]  # (step, wall_ms), slowest first, TOP_STEPS of them

    def to_json(self) -> dict[str, Any]:
        return {**_fields(self), "wall": self.wall.to_json(), "slowest": list(self.slowest)}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> StepWalls:
        return cls(
            wall=Digest.from_json(record["wall"]),
            fastest_step=record["fastest_step"],
            slowest_step=record["slowest_step"],
            slowest=[(int(s), float(w)) for s, w in record["slowest"]],
        )


@dataclass
class HostWalls:
    """One host's host-step wall times: of every step, and of its whole steps, which are all
    but its first and last host step (``tables.step_times.step_edges``, ``whole_steps``: a
    capture cut mid-step cuts those, which ``Trace.step_times`` and host skew leave out).

    Both are kept because a worker does not know which a trace will read: one read to analyze
    (``Trace.partial_edges``) tells of whole steps only, one that keeps every step (as
    ``load_trace`` returns it) of every step, and the figures are those of its step times."""

    every: StepWalls
    whole: StepWalls
    first_step: int
    last_step: int

    def of(self, partial_edges: bool) -> StepWalls:
        """The figures of the steps ``Trace.step_times`` keeps (``partial_edges``: whole ones)."""
        return self.whole if partial_edges else self.every

    def to_json(self) -> dict[str, Any]:
        return {**_fields(self), "every": self.every.to_json(), "whole": self.whole.to_json()}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> HostWalls:
        return cls(
            every=StepWalls.from_json(record["every"]),
            whole=StepWalls.from_json(record["whole"]),
            first_step=int(record["first_step"]),
            last_step=int(record["last_step"]),
        )


@dataclass
class StepAggregates:
    """What a pod's parent needs of one host's per-step tables (see the module docstring)."""

    rows: dict[str, int]  # per on-disk table, its rows
    first_step: int | None  # of the straggler rows (host and device steps)
    last_step: int | None
    devices: list[DeviceStepStats]
    tracing: TracingStats
    host: HostWalls | None  # None: the host has no step markers

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "devices": [d.to_json() for d in self.devices],
            "tracing": self.tracing.to_json(),
            "host": None if self.host is None else self.host.to_json(),
        }

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> StepAggregates:
        return cls(
            rows={str(k): int(v) for k, v in record["rows"].items()},
            first_step=record["first_step"],
            last_step=record["last_step"],
            devices=[DeviceStepStats.from_json(d) for d in record["devices"]],
            tracing=TracingStats.from_json(record["tracing"]),
            host=None if record["host"] is None else HostWalls.from_json(record["host"]),
        )


@dataclass
class StepOverview:
    """What the reports say of every step at once (``xlaprof.tables.step_stats``): per device
    its steps' medians and slowest step (``STEP_STATS_COLUMNS``), the smallest step numbers
    with autotuning, and the host vs device table's verdicts with the medians behind them
    (of the rows with a verdict)."""

    devices: pd.DataFrame
    autotune_steps: list[int]
    tracing: TracingStats
    median_busy_s: float | None
    median_tracing_s: float | None
    median_idle_s: float | None
