"""What the per-step bottleneck analyzers share: each device's steady steps, a class's share of
them, and the user lines and host spans to name as evidence.

Shares are of the steps' summed wall time (XProf averages per-step percentages; on steps of
equal length the two agree, and a sum does not let a 1 µs step weigh as much as a 1 s one),
over each device's steady steps: all but the first and last of a device with more than
``EDGE_STEPS`` steps (``xlaprof.tables.device.bottleneck.steady_steps``, XProf's rule). A
device with no steps is judged over its whole capture, one window, and says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xlaprof.findings import Location
from xlaprof.model.input import AnalysisInput

if TYPE_CHECKING:
    pass

# How many lines, steps and spans a finding names.
TOP = 3
MAX_STEPS_LISTED = 8
# A finding names a user line only where it holds at least this share of the device time the
# finding is about (its class's categories): a line with less does not explain the time, and
# naming it would point at the wrong code. The same tenth XProf's async-wait rule uses.
LINE_MIN_SHARE = 0.10
# Device op categories whose time belongs to each class (for the lines a finding names). An
# async wait is a host-offload transfer or a copy's done (``copy-done``); "other" is the
# catch-all of ops with no category of their own (a broadcast), not a wait.
CLASS_CATEGORIES = {
    "collective": {"collective"},
    "async_wait": {"host_offload", "copy"},
    "input_transfer": {"host_transfer"},
    "compute": {"matmul_conv", "fusion", "copy", "other"},
    "memory_bound": {"matmul_conv", "fusion", "copy", "other"},
    "compilation": {"autotune"},
}


@dataclass
class ClassShare:
    """One device's steady steps and the share of their wall time one or more classes take."""

    session: str
    host: str
    device: str
    steps: int  # steady steps judged (0: the whole capture, one window)
    wall_s: float
    seconds: float
    # steps this class bounds: the smallest (``step_stats.BOUND_STEPS`` a class), sorted
    bound_steps: list[int] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.seconds / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def window(self) -> str:
        if not self.steps:
            return "the whole capture (no steps)"
        return f"{self.steps} steady step{'s' if self.steps > 1 else ''}"


def trace_unmeasured(data: AnalysisInput) -> str | None:
    """Why a bottleneck analyzer cannot judge ``data`` (no capture, no device steps), or None."""
    from xlaprof.tables.step_stats import by_device

    if data.trace is None or data.trace.device_summary is None:
        return "needs a profiler capture (an xplane, or a run directory's trace window)"
    table = by_device(data.trace.summary())  # per device: a pod's from its workers
    if table.empty or not table["any_wall"].astype(bool).any():
        return "the capture has no device events to split by cause"
    return None


def class_shares(data: AnalysisInput, classes: Iterable[str]) -> list[ClassShare]:
    """Per device: the share of its steady steps' wall time that ``classes`` take together.

    From the per-device sums over steady steps (``tables.step_stats.by_device``: a pod's made
    by its workers, host by host), so a pod's per-step rows are not read."""
    from xlaprof.tables.step_stats import by_device

    if trace_unmeasured(data) is not None:
        return []
    assert data.trace is not None
    names = list(classes)
    found = []
    for row in by_device(data.trace.summary()).to_dict(orient="records"):
        wall = float(row["wall_s"])
        if wall <= 0:
            continue
        seconds = float(sum(row[f"{name}_s"] for name in names))
        bound = sorted({int(step) for name in names for step in row[f"bound_{name}"]})
        found.append(
            ClassShare(
                session=str(row["session"]),
                host=str(row["host"]),
                device=str(row["device"]),
                steps=int(row["steps"]),
                wall_s=wall,
                seconds=seconds,
                bound_steps=bound,
            )
        )
    # Devices with steps are judged on them; one with none (a GPU that ran a few copies, on a
    # host whose other GPUs have steps) is judged only where no device has steps.
    stepped = [share for share in found if share.steps]
    return stepped or found


def worst(shares: list[ClassShare], minimum: float) -> list[ClassShare]:
    """The devices at or above ``minimum``, largest share first."""
    return sorted((s for s in shares if s.share >= minimum), key=lambda s: -s.share)


def evidence(shares: list[ClassShare], threshold: str) -> dict[str, Any]:
    """The evidence every bottleneck finding gives: who, over which steps, how much."""
    top = shares[0]
    per_device = {
        (f"{s.host}/{s.device}" if len({x.host for x in shares}) > 1 else s.device): round(
            s.share, 3
        )
        for s in shares[:8]
    }
    steps = sorted({step for s in shares for step in s.bound_steps})
    return {
        "share_of_step_time": round(top.share, 3),
        "device": top.device,
        "host": top.host,
        "judged_over": top.window,
        "seconds": round(top.seconds, 6),
        "wall_seconds": round(top.wall_s, 6),
        "devices_at_or_above_threshold": per_device,
        "steps_bound_by_it": steps[:MAX_STEPS_LISTED]
        + (["..."] if len(steps) > MAX_STEPS_LISTED else []),
        "threshold": threshold,
    }


def top_lines(data: AnalysisInput, klass: str | None) -> dict[str, float]:
    """The user lines with the most device time in ``klass``'s categories (all ops if None):
    ``file:line`` -> share of that time."""
    from xlaprof.tables.device.lines import by_line

    if data.trace is None or data.trace.device_summary is None:
        return {}
    lines = data.trace.device_summary.lines
    if lines is None or lines.empty:
        return {}
    table = by_line(lines, CLASS_CATEGORIES.get(klass or "") if klass else None)
    if table.empty:
        return {}
    total = float(table["device_s"].sum())
    named = table[table["file"].notna()].head(TOP)
    return {
        f"{file}:{line}": round(float(seconds) / total, 3)
        for file, line, seconds in zip(named["file"], named["line"], named["device_s"], strict=True)
        if total > 0
    }


def line_location(lines: dict[str, float]) -> Location | None:
    """The first of ``top_lines`` that holds ``LINE_MIN_SHARE`` of the time, as a ``Location``;
    None where no line does."""
    for where, share in lines.items():
        file, _, line = where.rpartition(":")
        if line.isdigit() and share >= LINE_MIN_SHARE:
            return Location(file, int(line))
    return None


def no_line_reason(lines: dict[str, float], what: str) -> str:
    """Why a finding about ``what`` ("the waits") names no line, from its ``top_lines``."""
    if not lines:
        return f"none: {what} have no user source line in the capture"
    where, share = next(iter(lines.items()))
    return (
        f"none: no user line holds {LINE_MIN_SHARE:.0%} of {what}' device time (the most: "
        f"{where.rpartition('/')[2]}, {share:.1%})"
    )


def host_spans(data: AnalysisInput, pattern: Any, hosts: set[str]) -> dict[str, float]:
    """The host spans matching ``pattern`` with the most time on ``hosts``: name -> seconds."""
    from xlaprof.tables import categorical as cols

    if data.trace is None:
        return {}
    events = data.trace.events_source.held_events()
    if events.empty:  # a pod's are not held: not worth reading its caches for
        return {}
    host = events[cols.equals(events["plane_kind"], "host") & cols.member(events["host"], hosts)]
    chosen = host[cols.matches(host["name"], pattern)]
    if chosen.empty:
        return {}
    totals = chosen.groupby(chosen["name"].astype(str))["duration_ns"].sum()
    return {
        str(name): round(float(ns) / 1e9, 6)
        for name, ns in totals.sort_values(ascending=False).head(TOP).items()
    }
