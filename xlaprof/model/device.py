"""The device model of a capture, as the tables compute it and a ``Trace`` holds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class DeviceSummary:
    """The device model of a capture: small, additive tables a parent can merge.

    ``devices`` (device table), ``steps`` (per device and step), ``ops`` (per device and op,
    with additive columns only re-derived after a merge), ``utilization`` (per device over the
    capture), ``tracing`` (per host step: tracing against device busy), ``bottleneck`` (per
    device and step: seconds per cause and the one that bounds the step) and ``lines`` (device
    time per user source line and device; None where the capture carried no HLO sources) with
    ``line_totals`` (the same summed per line over devices, with shares), all keyed by session
    and host; ``events`` is the raw event count and ``warnings`` what was wrong with
    the capture.
    ``xlaprof.tables.device`` computes and merges them and documents their columns.
    """

    devices: pd.DataFrame
    steps: pd.DataFrame
    ops: pd.DataFrame
    utilization: pd.DataFrame
    tracing: pd.DataFrame
    events: int = 0
    warnings: list[str] = field(default_factory=list)
    bottleneck: pd.DataFrame | None = None
    lines: pd.DataFrame | None = None
    line_totals: pd.DataFrame | None = None
