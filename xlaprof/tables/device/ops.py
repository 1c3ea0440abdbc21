"""Per device and op: occurrences, total and self time, FLOPs, bytes, achieved rates and the
roofline side (``bound``); and the top ops across devices.

Ops rank by **self time**, as XProf's ``hlo_stats`` does: a wrapper (``call.4``, ``while.24``,
a ``conditional``, a fusion that calls computations) lasts as long as the ops inside it, so by
total time it would rank just above them and count their time twice. ``parent`` names the op
an op ran inside (its most frequent enclosing op on the same line), so a table can show the
nesting.

**Async pairs.** An asynchronous op is a ``*-start`` that issues the work and a ``*-done`` that
waits for it. Neither op's own time is the time that moved the bytes: the start takes
nanoseconds whatever it moves, and the done lasts only as long as the chip still had to wait,
3 ns for a copy that had already landed (the v6e capture's ``copy-done.1``, 0.3 us over its
100 runs on a chip: XProf's ``hlo_stats`` "measured bandwidth" over that wait is 1.7e9 GiB/s,
1.8 EB/s). So a start has no rate, and a done's ``bytes_per_s`` is its bytes over ``async_s``,
the pairs' whole span from the TPU's ``Async XLA Ops`` line (start issued to done finished),
over which the transfer ran (a lower bound on its rate); a done with no matched pair there has
no rate (None): a rate is only shown where the bytes and the time that moved them are known.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from xlaprof.parse.events import ASYNC_OPS_LINE
from xlaprof.tables import categorical as cols
from xlaprof.tables.device.events import device_events
from xlaprof.tables.device.steps import with_session

if TYPE_CHECKING:
    import pandas as pd


OP_COLUMNS = [
    "session",
    "host",
    "device",
    "kind",
    "name",
    "category",
    "hlo_category",
    "program_id",
    "hlo_module",
    "occurrences",
    "total_s",
    "self_s",
    "flops",
    "bytes_accessed",
    "flops_per_s",
    "bytes_per_s",
    "intensity",
    "bound",
    "short_name",
    "framework_op",
    "parent",
    "async_s",
]

# ``copy-start.4``, ``all-reduce-start``, ``collective-permute-start.1``: the start of a pair.
_ASYNC_START = re.compile(r"-start(?:\.\d+)?$")
# ``copy-done.4``, ``all-gather-done``: the done of a pair (its wait).
_ASYNC_DONE = re.compile(r"-done(?:\.\d+)?$")


def device_ops(
    events: pd.DataFrame,
    devices: pd.DataFrame | None = None,
    frame: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per device and op: occurrences, total and self time (s), FLOPs, bytes, rates, bound.

    ``flops`` and ``bytes_accessed`` are totals over the occurrences (None where the trace
    has no such stat). ``bound`` is ``compute`` or ``memory`` (the op's side of the roofline)
    only where the device's peak FLOP/s and bytes/s are known (TPU plane stats).
    """
    import numpy as np
    import pandas as pd

    frame = device_events(with_session(events)) if frame is None else frame
    rows = np.flatnonzero(frame["op_line"].to_numpy(dtype=bool))
    if not len(rows):
        return pd.DataFrame(columns=OP_COLUMNS)
    # An op's category follows from its name and XLA category, except that its runs while the
    # compiler autotunes are a row of their own (category "autotune"). Groups by one code per
    # distinct key (a missing value a key of its own), in order of first appearance, as
    # groupby(sort=False, dropna=False) on the six columns orders them.
    group_keys = ["session", "host", "device", "kind", "op", "category"]
    every = slice(None) if len(rows) == len(frame) else rows  # every row an op: no gather
    group, firsts = cols.group_codes([cols.codes(frame[k])[every] for k in group_keys])
    at = rows[firsts]
    measured = pd.DataFrame(
        {c: frame[c].to_numpy()[every] for c in ("time_ns", "self_ns", "flops", "bytes_accessed")}
    )
    # pandas' grouped sums (compensated) and firsts (the first non-null), as always; FLOPs and
    # bytes summed over no measured value are NaN (not measured), not 0
    sums = measured.groupby(group, sort=False).sum()
    summed = {}
    for column in ("flops", "bytes_accessed"):
        seen = np.bincount(group, weights=~np.isnan(measured[column].to_numpy()), minlength=len(at))
        summed[column] = np.where(seen > 0, sums[column].to_numpy(), np.nan)
    texts = ["hlo_category", "program_id", "hlo_module", "short_name", "framework_op", "parent_op"]
    # the table built once from its columns
    table = pd.DataFrame(
        {
            **{k: frame[k].take(at).reset_index(drop=True) for k in group_keys[:2]},
            **{k: cols.plain(frame[k].take(at)) for k in group_keys[2:4]},
            "name": frame["op"].take(at).tolist(),  # typed from its values, as a key was
            "category": cols.plain(frame["category"].take(at)),
            "occurrences": np.bincount(group),
            **summed,
            # a Series keeps the object dtype (an object array would be typed from its values)
            **{
                "parent" if column == "parent_op" else column: pd.Series(
                    cols.first_values(frame[column], rows, group, firsts), dtype=object
                )
                for column in texts
            },
            "total_s": sums["time_ns"].to_numpy() / 1e9,
            "self_s": sums["self_ns"].to_numpy() / 1e9,
        }
    )
    table["async_s"] = _async_spans(frame, table)
    add_rates(table, devices)
    table = table.sort_values(["self_s", "total_s"], ascending=False, ignore_index=True)
    return table[OP_COLUMNS]


def _async_spans(frame: pd.DataFrame, table: pd.DataFrame) -> list[float | None]:
    """Per op row, the total span of its async pairs on the ``Async XLA Ops`` line (the line's
    events name the done op in ``hlo_op``), NaN for an op with no such pair."""
    import numpy as np
    import pandas as pd

    keys = ["session", "host", "device"]
    on_line = cols.equals(frame["line"], ASYNC_OPS_LINE)
    if not on_line.any():
        return [None] * len(table)
    pairs = frame.loc[on_line, [*keys, "hlo_op", "start_ns", "end_ns"]]
    spans = pd.DataFrame(
        {
            **{k: pairs[k].astype(str).to_numpy() for k in keys},
            "name": pairs["hlo_op"].astype(str).to_numpy(),
            "async_s": (pairs["end_ns"] - pairs["start_ns"]).to_numpy(dtype=np.float64) / 1e9,
        }
    )
    summed = spans.groupby([*keys, "name"], sort=False)["async_s"].sum()
    # one span per key: a lookup per op row (NaN where none, as a left join gave)
    found = dict(zip(summed.index.tolist(), summed.to_numpy().tolist(), strict=True))
    wanted = zip(*(table[k].astype(str).tolist() for k in [*keys, "name"]), strict=True)
    return [found.get(key, float("nan")) for key in wanted]


def add_rates(table: pd.DataFrame, devices: pd.DataFrame | None) -> None:
    """Fill flops_per_s, bytes_per_s, intensity and bound from the totals (in place)."""
    import numpy as np

    seconds = table["total_s"].to_numpy(dtype=np.float64)
    flops = table["flops"].to_numpy(dtype=np.float64)
    moved = table["bytes_accessed"].to_numpy(dtype=np.float64)
    # The start of an async pair only issues the work: no rate; its done's time is the pair's
    # span, where the pair was matched, else unknown (module docstring).
    names = table["name"].astype(str)
    starts = names.str.contains(_ASYNC_START).to_numpy(dtype=bool)
    seconds = np.where(starts, np.nan, seconds)
    dones = names.str.contains(_ASYNC_DONE).to_numpy(dtype=bool)
    if dones.any():
        spans = (
            table["async_s"].to_numpy(dtype=np.float64)
            if "async_s" in table.columns
            else np.full(len(table), np.nan)
        )
        seconds = np.where(dones, spans, seconds)
    with np.errstate(divide="ignore", invalid="ignore"):
        table["flops_per_s"] = np.where(seconds > 0, flops / seconds, np.nan)
        table["bytes_per_s"] = np.where(seconds > 0, moved / seconds, np.nan)
        table["intensity"] = np.where(moved > 0, flops / moved, np.nan)
    ridge: dict[str, float] = {}
    if devices is not None and not devices.empty:
        for row in devices.itertuples(index=False):
            peak_flops = getattr(row, "peak_flops_per_s", None)
            peak_bytes = getattr(row, "peak_bytes_per_s", None)
            if peak_flops and peak_bytes and peak_flops == peak_flops and peak_bytes > 0:
                ridge[f"{row.host}\0{row.device}"] = float(peak_flops) / float(peak_bytes)
    bounds: list[str | None] = []
    for host, device, intensity in zip(
        table["host"].astype(str), table["device"].astype(str), table["intensity"], strict=True
    ):
        point = ridge.get(f"{host}\0{device}")
        if point is None or intensity != intensity:
            bounds.append(None)
        else:
            bounds.append("compute" if intensity >= point else "memory")
    table["bound"] = bounds


def top_ops(ops: pd.DataFrame, limit: int = 10, by: Sequence[str] = ("name",)) -> pd.DataFrame:
    """Ops summed over devices (and hosts), most self time first: the "top device ops"
    (wrappers such as ``call.4`` rank by their own time, not that of the ops inside).

    A done's ``async_s`` is its pairs' spans summed where every device's row has them, else
    missing: the bytes are summed over every device, and a sum of spans over some devices
    made their rate a multiple of any one's (the v6e capture's ``copy-done.4``, its pairs on
    one chip's Async XLA Ops line of four: 36.1 GB/s over all four, 9.0 GB/s on that chip)."""

    if ops.empty:
        return ops.head(0)
    grouped = ops.groupby(list(by), observed=True, sort=False, dropna=False)
    table = grouped.agg(
        category=("category", "first"),
        devices=("device", "nunique"),
        occurrences=("occurrences", "sum"),
        total_s=("total_s", "sum"),
        self_s=("self_s", "sum"),
        flops=("flops", "sum"),
        bytes_accessed=("bytes_accessed", "sum"),
        flops_seen=("flops", "count"),
        bytes_seen=("bytes_accessed", "count"),
        **{
            column: (column, "first")  # the first non-null: vectorized, no call per group
            for column in ("short_name", "framework_op", "parent")
            if column in ops.columns and column not in by
        },
        **(
            {
                "async_s": ("async_s", "sum"),
                "async_seen": ("async_s", "count"),
                "rows": ("occurrences", "size"),
            }
            if "async_s" in ops.columns
            else {}
        ),
    ).reset_index()
    table = _unmeasured_as_nan(table)
    if "async_seen" in table.columns:
        seen, rows = table.pop("async_seen"), table.pop("rows")
        table["async_s"] = table["async_s"].where((seen > 0) & (seen == rows))
    return table.sort_values(["self_s", "total_s"], ascending=False, ignore_index=True).head(limit)


def _unmeasured_as_nan(table: pd.DataFrame) -> pd.DataFrame:
    """FLOPs and bytes summed over no measured value are NaN (not measured), not 0. Counted
    per group rather than a Python function per group: that took minutes on a million
    distinct op names."""
    table["flops"] = table["flops"].where(table.pop("flops_seen") > 0)
    table["bytes_accessed"] = table["bytes_accessed"].where(table.pop("bytes_seen") > 0)
    return table
