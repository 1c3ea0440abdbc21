"""Per device and op: occurrences, total and self time, FLOPs, bytes, achieved rates and the
roofline side (``bound``); and the top ops across devices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

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
]


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
    import pandas as pd

    frame = device_events(with_session(events)) if frame is None else frame
    ops = frame[frame["op_line"]].copy()
    if ops.empty:
        return pd.DataFrame(columns=OP_COLUMNS)
    ops["program_id"] = ops["program_id"].astype(object)
    ops["hlo_category"] = ops["hlo_category"].astype(object)
    ops["hlo_module"] = ops["hlo_module"].astype(object)
    # An op's category follows from its name and XLA category, except that its runs while the
    # compiler autotunes are a row of their own (category "autotune").
    group_keys = ["session", "host", "device", "kind", "op", "category"]
    grouped = ops.groupby(group_keys, observed=True, sort=False, dropna=False)
    table = grouped.agg(
        occurrences=("time_ns", "size"),
        total_ns=("time_ns", "sum"),
        self_ns=("self_ns", "sum"),
        flops=("flops", "sum"),
        bytes_accessed=("bytes_accessed", "sum"),
        flops_seen=("flops", "count"),
        bytes_seen=("bytes_accessed", "count"),
        hlo_category=("hlo_category", "first"),
        program_id=("program_id", "first"),
        hlo_module=("hlo_module", "first"),
    ).reset_index()
    table = _unmeasured_as_nan(table)
    table = table.rename(columns={"op": "name"})
    table["total_s"] = table["total_ns"] / 1e9
    table["self_s"] = table["self_ns"] / 1e9
    add_rates(table, devices)
    table = table.sort_values(["total_s"], ascending=False, ignore_index=True)
    return table[OP_COLUMNS]


def add_rates(table: pd.DataFrame, devices: pd.DataFrame | None) -> None:
    """Fill flops_per_s, bytes_per_s, intensity and bound from the totals (in place)."""
    import numpy as np

    seconds = table["total_s"].to_numpy(dtype=np.float64)
    flops = table["flops"].to_numpy(dtype=np.float64)
    moved = table["bytes_accessed"].to_numpy(dtype=np.float64)
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
    bounds = []
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
    """Ops summed over devices (and hosts), most total time first: the "top device ops"."""

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
    ).reset_index()
    table = _unmeasured_as_nan(table)
    return table.sort_values("total_s", ascending=False, ignore_index=True).head(limit)


def _unmeasured_as_nan(table: pd.DataFrame) -> pd.DataFrame:
    """FLOPs and bytes summed over no measured value are NaN (not measured), not 0. Counted
    per group rather than a Python function per group: that took minutes on a million
    distinct op names."""
    table["flops"] = table["flops"].where(table.pop("flops_seen") > 0)
    table["bytes_accessed"] = table["bytes_accessed"].where(table.pop("bytes_seen") > 0)
    return table
