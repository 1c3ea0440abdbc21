"""One host's (or any) events reduced to a ``DeviceSummary``, and several merged into one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from xlaprof.model.device import DeviceSummary
from xlaprof.tables.device.bottleneck import BOTTLENECK_COLUMNS, step_bottlenecks
from xlaprof.tables.device.events import device_events
from xlaprof.tables.device.lines import LINE_COLUMNS, by_line, device_time_by_line
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
    sources: pd.DataFrame | None = None,
) -> DeviceSummary:
    """Reduce one host's (or any) events to a ``DeviceSummary`` (see the module docstring).

    ``sources``: the HLO instructions' source lines (``xlaprof.parse.hlo_proto``, with a
    ``host`` column), for device time per user line; without them ``lines`` is None.
    """
    import pandas as pd

    events = with_session(events)
    frame = device_events(events)
    windows = step_windows(events, frame, host_bounds)
    ops = device_ops(events, devices, frame=frame)
    lines = None if sources is None else device_time_by_line(frame, sources)
    return DeviceSummary(
        devices=devices if devices is not None else pd.DataFrame(),
        steps=device_steps(events, host_bounds, frame=frame, windows=windows),
        ops=ops,
        utilization=device_utilization(events, host_bounds, frame=frame, windows=windows),
        tracing=tracing_vs_device(events, host_bounds, frame),
        events=len(events),
        bottleneck=step_bottlenecks(events, frame, windows, ops),
        lines=lines,
        line_totals=None if lines is None else by_line(lines),
    )


def merge_summaries(summaries: Iterable[DeviceSummary]) -> DeviceSummary:
    """One summary from several hosts' (concatenation: rows are keyed by session and host)."""
    import pandas as pd

    summaries = list(summaries)

    def cat(name: str, columns: list[str] | None) -> pd.DataFrame:
        frames = [getattr(s, name) for s in summaries if not getattr(s, name).empty]
        if not frames:
            return pd.DataFrame(columns=columns)
        return pd.concat(frames, ignore_index=True)

    ops = cat("ops", OP_COLUMNS).sort_values(
        ["self_s", "total_s"], ascending=False, ignore_index=True
    )
    lines = (
        None
        if all(s.lines is None for s in summaries)
        else _concat([s.lines for s in summaries], LINE_COLUMNS)
    )
    return DeviceSummary(
        devices=cat("devices", None),
        steps=cat("steps", STEP_COLUMNS),
        ops=ops,
        utilization=cat("utilization", UTILIZATION_COLUMNS),
        tracing=cat("tracing", TRACING_COLUMNS),
        events=sum(s.events for s in summaries),
        warnings=[w for s in summaries for w in s.warnings],
        bottleneck=_concat([s.bottleneck for s in summaries], BOTTLENECK_COLUMNS),
        lines=lines,
        line_totals=None if lines is None else by_line(lines),
    )


def _concat(frames: list[pd.DataFrame | None], columns: list[str]) -> pd.DataFrame:
    import pandas as pd

    present = [f for f in frames if f is not None and not f.empty]
    if not present:
        return pd.DataFrame(columns=columns)
    return pd.concat(present, ignore_index=True)
