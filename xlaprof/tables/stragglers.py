"""Stragglers: per step and device, the slowest host, by how much, and what it was doing.

In synchronous training every host waits at each collective for the slowest one, so the hosts'
step times tell who is slow, and the split of a step into collective time and the rest tells
whether a host was waiting on the others (collective) or busy with its own work (host work: its
own Python, input pipeline, compiles, device compute). Input: ``pod.host_steps(trace)`` rows
(host, device, step, wall_ms, collective_ms, own_ms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = [
    "step",
    "device",
    "hosts",
    "slowest_host",
    "slowest_ms",
    "median_ms",
    "behind_ms",
    "behind",
    "collective_ms",
    "own_ms",
    "waiting_on",
    "cause_host",
    "cause_own_ms",
]
WAITING_ON = ("collective", "host work")


def stragglers(host_steps: pd.DataFrame) -> pd.DataFrame:
    """One row per (step, device) seen on two or more hosts.

    ``slowest_host`` has the longest wall time; ``behind_ms`` is its lead over the median host
    (``behind`` as a share of the median). ``waiting_on`` says where its extra time went: the
    part of its step over the median spent in collectives ("collective": it waited for another
    host) or in the rest ("host work"). ``cause_host`` is the host with the most time outside
    collectives: the one the others waited for. When every host took the same time there is no
    straggler: ``slowest_host``, ``waiting_on`` and ``cause_host`` are None.

    Computed per group with pandas' grouped reductions (no Python step per group), so a pod's
    rows can be taken a range of steps at a time (``xlaprof.inputs.pod.step_tables``).
    """
    import numpy as np
    import pandas as pd

    if host_steps is None or host_steps.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = host_steps[["host", "device", "step", "wall_ms", "collective_ms", "own_ms"]].copy()
    rows["device"] = rows["device"].astype(str)
    for column in ("wall_ms", "collective_ms", "own_ms"):
        rows[column] = rows[column].astype("float64")
    rows = rows.reset_index(drop=True)
    groups = rows.groupby(["step", "device"], sort=True)
    hosts = groups["host"].nunique()
    medians = groups[["wall_ms", "collective_ms", "own_ms"]].median()
    slowest = rows.loc[groups["wall_ms"].idxmax()].set_index(["step", "device"])
    cause = rows.loc[groups["own_ms"].idxmax()].set_index(["step", "device"])
    keep = hosts >= 2
    hosts, medians = hosts[keep], medians[keep]
    slowest, cause = slowest.loc[hosts.index], cause.loc[hosts.index]
    median = medians["wall_ms"].to_numpy()
    behind = slowest["wall_ms"].to_numpy() - median
    late = behind > 0
    extra_collective = slowest["collective_ms"].to_numpy() - medians["collective_ms"].to_numpy()
    extra_own = slowest["own_ms"].to_numpy() - medians["own_ms"].to_numpy()
    waiting = np.where(extra_collective > extra_own, WAITING_ON[0], WAITING_ON[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(median > 0, behind / np.where(median > 0, median, 1.0), np.nan)
    table = pd.DataFrame(
        {
            "step": hosts.index.get_level_values("step").astype("int64"),
            "device": hosts.index.get_level_values("device").astype(str),
            "hosts": hosts.to_numpy().astype("int64"),
            "slowest_host": _where(late, slowest["host"].astype(str).to_numpy()),
            "slowest_ms": slowest["wall_ms"].to_numpy(),
            "median_ms": median,
            "behind_ms": behind,
            "behind": share,
            "collective_ms": slowest["collective_ms"].to_numpy(),
            "own_ms": slowest["own_ms"].to_numpy(),
            "waiting_on": _where(late, waiting),
            "cause_host": _where(late, cause["host"].astype(str).to_numpy()),
            "cause_own_ms": np.where(late, cause["own_ms"].to_numpy(), np.nan),
        },
        columns=COLUMNS,
    )
    return table.reset_index(drop=True)


def _where(keep: Any, values: Any) -> Any:
    """``values`` where ``keep``, None elsewhere (an object array)."""
    import numpy as np

    out = np.asarray(values, dtype=object).copy()
    out[~np.asarray(keep, dtype=bool)] = None
    return out
