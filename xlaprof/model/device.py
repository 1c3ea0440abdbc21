"""The device model of a capture, as the tables compute it and a ``Trace`` holds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xlaprof.model.ondisk import BOTTLENECK, DEVICE_STEPS, TRACING, OnDisk, held

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.model.ondisk import StepTables
    from xlaprof.model.stats import StepOverview

# A pod's per-step rows, read from its hosts' files when asked for (``model.ondisk``).
_STEPS: OnDisk[pd.DataFrame] = OnDisk(DEVICE_STEPS, via="tables")
_TRACING: OnDisk[pd.DataFrame] = OnDisk(TRACING, via="tables")
_BOTTLENECK: OnDisk[pd.DataFrame | None] = OnDisk(BOTTLENECK, via="tables", required=False)


# Keyword-only: ``steps`` and ``tracing`` have no default (``OnDisk`` raises for a required
# field's default) though the type checker sees their descriptors as defaults.
@dataclass(kw_only=True)
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

    A pod's summary holds no per-step rows: ``steps``, ``tracing`` and ``bottleneck`` are None
    when made and read from the hosts' files (``tables``) when asked for, every row; ``head``
    and ``rows`` read the first rows or count them without that, and ``overview`` and
    ``bottleneck_by_device`` hold what the reports and analyzers say of every step
    (``xlaprof.tables.step_stats``), merged from the workers' aggregates.
    """

    devices: pd.DataFrame
    steps: OnDisk[pd.DataFrame] = _STEPS
    ops: pd.DataFrame
    utilization: pd.DataFrame
    tracing: OnDisk[pd.DataFrame] = _TRACING
    events: int = 0
    warnings: list[str] = field(default_factory=list)
    bottleneck: OnDisk[pd.DataFrame | None] = _BOTTLENECK
    lines: pd.DataFrame | None = None
    line_totals: pd.DataFrame | None = None
    # per device over its steady steps: seconds per cause and the steps each bounds
    # (``xlaprof.tables.step_stats.BY_DEVICE_COLUMNS``); a pod's from its workers, a host's
    # made with its summary (``summarize_host``), else made from ``bottleneck`` when asked
    # (``step_stats.by_device``)
    bottleneck_by_device: pd.DataFrame | None = field(default=None, repr=False)
    tables: StepTables | None = field(default=None, repr=False)
    overview: StepOverview | None = field(default=None, repr=False)

    def on_disk(self, name: str) -> bool:
        """Whether ``steps``, ``tracing`` or ``bottleneck`` (``name``) stays in the hosts'
        files (a pod's per-step rows: read when asked for) rather than in memory."""
        return held(self, name) is None and self.tables is not None

    def head(self, name: str, rows: int) -> pd.DataFrame:
        """The first ``rows`` rows of ``steps``, ``tracing`` or ``bottleneck`` (``name``),
        hosts in order."""
        import pandas as pd

        frame = held(self, name)
        if frame is None and self.tables is not None:
            return self.tables.table_head(_TABLES[name], rows)
        frame = getattr(self, name)
        return pd.DataFrame() if frame is None else frame.head(rows)

    def rows(self, name: str) -> int:
        """How many rows ``steps``, ``tracing`` or ``bottleneck`` (``name``) has, without
        reading them."""
        frame = held(self, name)
        if frame is None and self.tables is not None:
            return self.tables.table_rows(_TABLES[name])
        frame = getattr(self, name)
        return 0 if frame is None else len(frame)


_TABLES = {"steps": DEVICE_STEPS, "tracing": TRACING, "bottleneck": BOTTLENECK}
