"""What the host-side analyzers share: the steady steps of a capture without device planes
(``AnalysisInput.host_activity``, ``xlaprof.tables.host_steps``).

Steady steps are those numbered ``warmup_steps`` or later (as the step model and the story
count them) that compiled nothing (a compile there is judged on its own by
``compile_in_step``).
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
    """The host steps after warm-up, as the step model counts warm-up (the first
    ``warmup_steps`` steps by position, ``model.warmup``: a live capture of steps 48 to 147
    has 48 and 49 as its warm-up)."""
    assert data.host_activity is not None
    steps = data.host_activity.steps
    return steps[steps["step"] >= data.first_steady_step()]


def steady(data: AnalysisInput) -> pd.DataFrame:
    """The steps after warm-up that compiled nothing (or whose compiling is not measured)."""
    steps = after_warmup(data)
    return steps[~(steps["compile_ms"].fillna(0) > 0)]
