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
    Grouped reductions over arrays (``tables.grouped``), no Python step per step.
    """
    import numpy as np
    import pandas as pd

    from xlaprof.tables.grouped import Groups, text_codes

    if step_times is None or step_times.empty:
        return pd.DataFrame(columns=SKEW_COLUMNS)
    # as a grouping on the step: no group without a step
    step_times = step_times[step_times["step"].notna().to_numpy()]
    host_codes, host_names = text_codes(step_times["host"])
    if (host_codes < 0).any():  # a row of no host is in no host's steps
        step_times, host_codes = step_times[host_codes >= 0], host_codes[host_codes >= 0]
    wall = step_times["wall_ms"].to_numpy(dtype="float64", na_value=np.nan)
    groups = Groups([step_times["step"].to_numpy(dtype=np.int64)])
    hosts = groups.distinct(host_codes)
    keep = hosts >= 2
    if not keep.any():
        return pd.DataFrame(columns=SKEW_COLUMNS)
    slowest = groups.first_max(wall)[keep]
    fastest = groups.first_min(wall)[keep]
    fast, slow = wall[fastest], wall[slowest]
    with np.errstate(divide="ignore", invalid="ignore"):
        skew = np.where(fast > 0, (slow - fast) / np.where(fast > 0, fast, 1.0), np.nan)
    table = pd.DataFrame(
        {
            "step": groups.keys[0][keep].astype(np.int64),
            "hosts": hosts[keep].astype(np.int64),
            "fastest_host": host_names[host_codes[fastest]],
            "fastest_ms": fast,
            "slowest_host": host_names[host_codes[slowest]],
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
