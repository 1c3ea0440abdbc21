"""What the host-side analyzers share: the steady steps of a capture without device planes
(``AnalysisInput.host_activity``, ``xlaprof.tables.host_steps``).

Steady steps are those after the first ``warmup_steps`` of each host, in capture order (a live
capture may start at step 48: its first steps are still the first it saw), and, unless asked,
not compiling (a compile there is judged on its own by ``compile_in_step``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlaprof.model.input import AnalysisInput

if TYPE_CHECKING:
    import pandas as pd


def host_unmeasured(data: AnalysisInput) -> str | None:
    """Why the host-side rules cannot judge ``data`` (no capture of host steps), or None."""
    activity = data.host_activity
    if activity is None or activity.steps.empty:
        return "needs a capture without device planes whose steps are marked"
    return None


def after_warmup(data: AnalysisInput) -> pd.DataFrame:
    """The host steps after each host's first ``warmup_steps`` (none when there are none)."""
    assert data.host_activity is not None
    steps = data.host_activity.steps
    order = steps.groupby("host")["start_ns"].rank(method="first")
    return steps[order > data.warmup_steps]


def steady(data: AnalysisInput) -> pd.DataFrame:
    """The steps after warm-up that compiled nothing (or whose compiling is not measured)."""
    steps = after_warmup(data)
    return steps[~(steps["compile_ms"].fillna(0) > 0)]
