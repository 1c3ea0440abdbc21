"""One host's (or any) events reduced to a ``DeviceSummary``, and several merged into one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from xlaprof.model.device import DeviceSummary
from xlaprof.tables import categorical as cols
from xlaprof.tables.device.bottleneck import (
    BOTTLENECK_COLUMNS,
    busiest_rows,
    step_bottlenecks,
    step_bounds,
)
from xlaprof.tables.device.events import MODEL_COLUMNS, device_events
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
from xlaprof.tables.step_stats import by_device

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


def summarize_host(
    events: pd.DataFrame,
    devices: pd.DataFrame | None = None,
    host_bounds: pd.DataFrame | None = None,
    sources: pd.DataFrame | None = None,
    device_bounds: pd.DataFrame | None = None,
) -> DeviceSummary:
    """Reduce one host's (or any) events to a ``DeviceSummary`` (see the module docstring).

    ``sources``: the HLO instructions' source lines (``xlaprof.parse.hlo_sources``, with a
    ``host`` column), for device time per user line; without them ``lines`` is None.
    ``device_bounds``: where each step's device work lies, where it is known to differ from
    the host's step (a run's executions: the host runs ahead of the device), in the form of
    ``host_bounds``; the device's tables read its steps there, the host's figures stay in the
    host's steps. None: the device's steps are the host's.
    """
    import pandas as pd

    events = with_session(events)
    frame = device_events(events, MODEL_COLUMNS)
    groups = DeviceGroups.of(frame)  # each device's rows, found once for every table
    on_device = host_bounds if device_bounds is None else device_bounds
    windows = step_windows(events, frame, on_device, groups)
    ops = device_ops(events, devices, frame=frame)
    lines = None if sources is None else device_time_by_line(frame, sources)
    bottleneck = step_bottlenecks(events, frame, windows, ops, groups)
    summary = DeviceSummary(
        devices=devices if devices is not None else pd.DataFrame(),
        steps=device_steps(events, on_device, frame=frame, windows=windows, groups=groups),
        ops=ops,
        utilization=device_utilization(
            events, on_device, frame=frame, windows=windows, groups=groups
        ),
        tracing=bounds_of_steps(
            tracing_vs_device(events, host_bounds, frame, groups, device_bounds), bottleneck
        ),
        events=len(events),
        bottleneck=bottleneck,
        lines=lines,
        line_totals=None if lines is None else by_line(lines),
    )
    # made once here, as a pod's workers make theirs: the analyzers and tables read it many
    # times (``step_stats.by_device``)
    summary.bottleneck_by_device = by_device(summary)
    return summary


def bounds_of_steps(tracing: pd.DataFrame, bottleneck: pd.DataFrame) -> pd.DataFrame:
    """The host-vs-device table with each step's ``bound`` from the one step model
    (``bottleneck.busiest_bounds``: its busiest device's bottleneck); a step the bottleneck
    table does not number, or calls "tracing" (the device's idle remainder), keeps the table's
    own host-vs-device answer. A run's traced steps then take the step timeline's bound (the
    pipeline, ``tables.story.with_step_bounds``): the run's CPU clock measures the host's work
    that this table's spans leave out."""
    if tracing.empty:
        return tracing
    import numpy as np
    import pandas as pd

    busiest = busiest_rows(bottleneck) if not bottleneck.empty else np.zeros(0, np.int64)
    tracing = tracing.copy(deep=False)  # columns replaced below, none written in place
    # one row per (session, host, step) in the busiest rows: a lookup, not a join per row,
    # through one code per key of both tables (session and host compared as text)
    keys = [
        (mine[busiest], theirs)
        for mine, theirs in (
            cols.text_codes([bottleneck[name], tracing[name]]) for name in ("session", "host")
        )
    ]
    keys.append(
        (
            bottleneck["step"].to_numpy(dtype=np.int64, na_value=0)[busiest],
            tracing["step"].to_numpy(dtype=np.int64),
        )
    )
    found = _lookup(keys)
    # each row's bound as a code into one list of values: the table's own, then the busiest
    # device's (listed once each)
    own, values = cols.coded(tracing["bound"])
    missing = np.flatnonzero(own < 0)
    # a missing bound as the column holds it (NaN in a text column, None in an object one)
    values = [*values, tracing["bound"].iloc[missing[0]] if len(missing) else np.nan]
    own = np.where(own < 0, len(values) - 1, own)
    # the bottleneck's "tracing" is the device's idle time the host spent on nothing measured
    # (a remainder): such a step keeps the table's own answer, from the host's measured work
    if len(busiest):
        codes, known = step_bounds(bottleneck, busiest)
        usable = np.array([pd.notna(k) and k != "tracing" for k in known], dtype=bool)
        at = np.maximum(found, 0)
        use = (found >= 0) & usable[codes[at]]
        bounds = np.where(use, len(values) + codes[at], own)
        values += known
    else:
        bounds = own
    tracing["bound"] = _used(values, bounds)
    # tracing_bound: whether the bound is "tracing", on lazy-tensor hosts with a bound (None
    # elsewhere)
    lazy = tracing["lazy_tensor"].to_numpy(dtype=bool)
    verdicts = np.array(
        [None if v is None else v == "tracing" for v in values] + [None], dtype=object
    )
    verdict = np.where(lazy, bounds, len(values))
    tracing["tracing_bound"] = _used(verdicts.tolist(), verdict)
    return tracing


def _lookup(keys: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Per row of the second table, the row of the first (whose keys are distinct) with the
    same keys, -1 where none: each key a pair of integer arrays (first table, second). Two
    tables listing the same keys in the same order (a host's steps, one device each) match
    row for row without a lookup."""
    import numpy as np

    if all(np.array_equal(mine, theirs) for mine, theirs in keys):
        return np.arange(len(keys[0][1]), dtype=np.int64)
    size = len(keys[0][0])
    key = cols.group_codes([np.concatenate(pair) for pair in keys])[0]
    row_of = np.full(int(key.max()) + 1, -1, dtype=np.int64)
    row_of[key[:size]] = np.arange(size)
    found: np.ndarray = row_of[key[size:]]
    return found


def _used(values: list[object], codes: np.ndarray) -> Any:
    """``values[code]`` per row, typed from the values some row has (``categorical.typed``)."""
    import numpy as np

    used = np.flatnonzero(np.bincount(codes, minlength=len(values)))
    remap = np.zeros(len(values), dtype=np.int64)
    remap[used] = np.arange(len(used))
    return cols.typed([values[at] for at in used.tolist()], remap[codes])


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
    if lines is not None:
        # in the order one host's table has its rows (``device_time_by_line``): the most
        # seconds first, ties in the hosts' order; ``by_line`` sums each line's rows and takes
        # its top op in this order, so the merged hosts' totals are those of their events
        # summarized at once
        lines = lines.sort_values("device_s", ascending=False, kind="stable", ignore_index=True)
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
