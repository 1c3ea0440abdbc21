"""One host's (or any) events reduced to a ``DeviceSummary``, and several merged into one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from xlaprof.model.device import DeviceSummary
from xlaprof.tables.device.events import device_events
from xlaprof.tables.device.ops import OP_COLUMNS, device_ops
from xlaprof.tables.device.steps import (
    STEP_COLUMNS,
    UTILIZATION_COLUMNS,
    device_steps,
    device_utilization,
    step_windows,
    with_session,
)
from xlaprof.tables.device.tracing import TRACING_COLUMNS, tracing_vs_device

if TYPE_CHECKING:
    import pandas as pd


def summarize_host(
    events: pd.DataFrame,
    devices: pd.DataFrame | None = None,
    host_bounds: pd.DataFrame | None = None,
) -> DeviceSummary:
    """Reduce one host's (or any) events to a ``DeviceSummary`` (see the module docstring)."""
    import pandas as pd

    events = with_session(events)
    frame = device_events(events)
    windows = step_windows(events, frame, host_bounds)
    return DeviceSummary(
        devices=devices if devices is not None else pd.DataFrame(),
        steps=device_steps(events, host_bounds, frame=frame, windows=windows),
        ops=device_ops(events, devices, frame=frame),
        utilization=device_utilization(events, host_bounds, frame=frame, windows=windows),
        tracing=tracing_vs_device(events, host_bounds, frame),
        events=len(events),
    )


def merge_summaries(summaries: Iterable[DeviceSummary]) -> DeviceSummary:
    """One summary from several hosts' (concatenation: rows are keyed by session and host)."""
    import pandas as pd

    summaries = list(summaries)

    def cat(name: str, columns: list[str] | None) -> pd.DataFrame:
        frames: list[pd.DataFrame] = [
            getattr(s, name) for s in summaries if not getattr(s, name).empty
        ]
        if not frames:
            return pd.DataFrame(columns=columns)
        return pd.concat(frames, ignore_index=True)

    ops = cat("ops", OP_COLUMNS).sort_values("total_s", ascending=False, ignore_index=True)
    return DeviceSummary(
        devices=cat("devices", None),
        steps=cat("steps", STEP_COLUMNS),
        ops=ops,
        utilization=cat("utilization", UTILIZATION_COLUMNS),
        tracing=cat("tracing", TRACING_COLUMNS),
        events=sum(s.events for s in summaries),
        warnings=[w for s in summaries for w in s.warnings],
    )
