"""One host's (or any) events reduced to a ``DeviceSummary``, and several merged into one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from xlaprof.model.device import DeviceSummary
from xlaprof.tables import categorical as cols
from xlaprof.tables.device.bottleneck import (
    BOTTLENECK_COLUMNS,
    busiest_bounds,
    step_bottlenecks,
)
from xlaprof.tables.device.events import device_events
from xlaprof.tables.device.lines import LINE_COLUMNS, by_line, device_time_by_line
from xlaprof.tables.device.ops import OP_COLUMNS, device_ops
from xlaprof.tables.device.steps import (
    STEP_COLUMNS,
    UTILIZATION_COLUMNS,
    DeviceGroups,
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

    ``sources``: the HLO instructions' source lines (``xlaprof.parse.hlo_sources``, with a
    ``host`` column), for device time per user line; without them ``lines`` is None.
    """
    import pandas as pd

    events = with_session(events)
    frame = device_events(events)
    groups = DeviceGroups.of(frame)  # each device's rows, found once for every table
    windows = step_windows(events, frame, host_bounds, groups)
    ops = device_ops(events, devices, frame=frame)
    lines = None if sources is None else device_time_by_line(frame, sources)
    bottleneck = step_bottlenecks(events, frame, windows, ops, groups)
    return DeviceSummary(
        devices=devices if devices is not None else pd.DataFrame(),
        steps=device_steps(events, host_bounds, frame=frame, windows=windows, groups=groups),
        ops=ops,
        utilization=device_utilization(
            events, host_bounds, frame=frame, windows=windows, groups=groups
        ),
        tracing=bounds_of_steps(tracing_vs_device(events, host_bounds, frame, groups), bottleneck),
        events=len(events),
        bottleneck=bottleneck,
        lines=lines,
        line_totals=None if lines is None else by_line(lines),
    )


def bounds_of_steps(tracing: pd.DataFrame, bottleneck: pd.DataFrame) -> pd.DataFrame:
    """The host-vs-device table with each step's ``bound`` from the one step model
    (``bottleneck.busiest_bounds``: its busiest device's bottleneck), so this table, the
    bottleneck table and the step timeline never disagree; a step the bottleneck table does not
    number keeps the table's own host-vs-device answer."""
    if tracing.empty:
        return tracing
    import numpy as np
    import pandas as pd

    table = busiest_bounds(bottleneck, ordered=False)
    tracing = tracing.copy()
    # busiest_bounds has one row per (session, host, step): a lookup, not a join per row,
    # through one code per key of both tables
    both = [
        pd.concat([table[name].astype(str), tracing[name].astype(str)], ignore_index=True)
        for name in ("session", "host")
    ]
    steps = np.concatenate(
        [table["step"].to_numpy(dtype=np.int64), tracing["step"].to_numpy(dtype=np.int64)]
    )
    key = cols.group_codes([*(cols.codes(b) for b in both), pd.factorize(steps)[0]])[0]
    row_of = np.full(int(key.max()) + 1, -1, dtype=np.int64)
    row_of[key[: len(table)]] = np.arange(len(table))
    found = row_of[key[len(table) :]]
    own = tracing["bound"].to_numpy(dtype=object)
    # the bottleneck's "tracing" is the device's idle time the host spent on nothing measured
    # (a remainder): such a step keeps the table's own answer, from the host's measured work
    if len(table):
        known = table["bound"].to_numpy(dtype=object)[np.maximum(found, 0)]
        use = (found >= 0) & pd.notna(known) & (known != "tracing")
        bounds = np.where(use, known, own)
    else:
        bounds = own
    tracing["bound"] = bounds.tolist()
    lazy = tracing["lazy_tensor"].to_numpy(dtype=bool)
    verdict = (bounds == "tracing").astype(object)
    verdict[~lazy | np.equal(bounds, np.array(None, dtype=object))] = None  # None, not NaN
    tracing["tracing_bound"] = verdict.tolist()
    return tracing


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
