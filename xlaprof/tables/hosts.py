"""Per-host step-time skew: in synchronous training the slowest host sets every step's pace."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def host_skew(step_times: pd.DataFrame) -> pd.DataFrame:
    """Per step with more than one host: fastest and slowest host and the skew.

    ``step_times`` has columns host, step, wall_ms (``Trace.step_times()``). ``skew`` is
    (slowest - fastest) / fastest.
    """
    import pandas as pd

    rows = []
    step: Any  # a group's key: its step number
    for step, group in step_times.groupby("step", observed=True):
        if group["host"].nunique() < 2:
            continue
        slowest = group.iloc[group["wall_ms"].argmax()]
        fastest = group.iloc[group["wall_ms"].argmin()]
        rows.append(
            {
                "step": int(step),
                "hosts": int(group["host"].nunique()),
                "fastest_host": str(fastest["host"]),
                "fastest_ms": float(fastest["wall_ms"]),
                "slowest_host": str(slowest["host"]),
                "slowest_ms": float(slowest["wall_ms"]),
                "skew": float((slowest["wall_ms"] - fastest["wall_ms"]) / fastest["wall_ms"])
                if fastest["wall_ms"] > 0
                else None,
            }
        )
    columns = ["step", "hosts", "fastest_host", "fastest_ms", "slowest_host", "slowest_ms", "skew"]
    return pd.DataFrame(rows, columns=columns)
