"""Per-host step-time skew: in synchronous training the slowest host sets every step's pace."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


SKEW_COLUMNS = ["step", "hosts", "fastest_host", "fastest_ms", "slowest_host", "slowest_ms", "skew"]


def host_skew(step_times: pd.DataFrame) -> pd.DataFrame:
    """Per step with more than one host: fastest and slowest host and the skew.

    ``step_times`` has columns host, step, wall_ms (``Trace.step_times()``, or
    ``step_walls`` of a pod's straggler rows). ``skew`` is (slowest - fastest) / fastest.
    Grouped reductions, no Python step per step.
    """
    import numpy as np
    import pandas as pd

    if step_times is None or step_times.empty:
        return pd.DataFrame(columns=SKEW_COLUMNS)
    rows = step_times[["host", "step", "wall_ms"]].reset_index(drop=True)
    rows = rows.assign(host=rows["host"].astype(str), wall_ms=rows["wall_ms"].astype("float64"))
    groups = rows.groupby("step", observed=True, sort=True)
    hosts = groups["host"].nunique()
    keep = hosts[hosts >= 2].index
    if not len(keep):
        return pd.DataFrame(columns=SKEW_COLUMNS)
    slowest = rows.loc[groups["wall_ms"].idxmax()].set_index("step").loc[keep]
    fastest = rows.loc[groups["wall_ms"].idxmin()].set_index("step").loc[keep]
    fast, slow = fastest["wall_ms"].to_numpy(), slowest["wall_ms"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        skew = np.where(fast > 0, (slow - fast) / np.where(fast > 0, fast, 1.0), np.nan)
    table = pd.DataFrame(
        {
            "step": np.asarray(keep, dtype=np.int64),
            "hosts": hosts.loc[keep].to_numpy().astype(np.int64),
            "fastest_host": fastest["host"].to_numpy(dtype=object),
            "fastest_ms": fast,
            "slowest_host": slowest["host"].to_numpy(dtype=object),
            "slowest_ms": slow,
            "skew": skew,
        },
        columns=SKEW_COLUMNS,
    )
    return table


def step_walls(host_steps: pd.DataFrame, marked: set[str]) -> pd.DataFrame:
    """Per host and step, its wall time (ms) as ``Trace.step_times()`` gives it, from straggler
    rows (HOST_STEP_COLUMNS): the host step for a host with step markers (``marked``), else
    its slowest device's step."""
    import pandas as pd

    if host_steps.empty:
        return pd.DataFrame(columns=["host", "step", "wall_ms"])
    hosts = host_steps["host"].astype(str)
    on_host = (host_steps["device"] == "host").to_numpy()
    is_marked = hosts.isin(marked).to_numpy()
    own = host_steps[on_host & is_marked][["host", "step", "wall_ms"]]
    devices = host_steps[~on_host & ~is_marked]
    if len(devices):
        slowest = devices.groupby(["host", "step"], observed=True, sort=False)["wall_ms"].max()
        own = pd.concat([own, slowest.reset_index()], ignore_index=True)
    return own.assign(host=own["host"].astype(str))
