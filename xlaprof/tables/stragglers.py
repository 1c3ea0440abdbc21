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
    """
    import pandas as pd

    rows = []
    if host_steps is None or host_steps.empty:
        return pd.DataFrame(columns=COLUMNS)
    step: Any  # a group's key: its step number
    for (step, device), group in host_steps.groupby(["step", "device"], sort=True):
        if group["host"].nunique() < 2:
            continue
        wall = group["wall_ms"].astype(float)
        median = float(wall.median())
        slowest = group.iloc[wall.argmax()]
        behind = float(slowest["wall_ms"]) - median
        row = {
            "step": int(step),
            "device": str(device),
            "hosts": int(group["host"].nunique()),
            "slowest_host": None,
            "slowest_ms": float(slowest["wall_ms"]),
            "median_ms": median,
            "behind_ms": behind,
            "behind": behind / median if median > 0 else None,
            "collective_ms": float(slowest["collective_ms"]),
            "own_ms": float(slowest["own_ms"]),
            "waiting_on": None,
            "cause_host": None,
            "cause_own_ms": None,
        }
        if behind > 0:
            extra_collective = float(slowest["collective_ms"]) - float(
                group["collective_ms"].median()
            )
            extra_own = float(slowest["own_ms"]) - float(group["own_ms"].median())
            cause = group.iloc[group["own_ms"].astype(float).argmax()]
            row |= {
                "slowest_host": str(slowest["host"]),
                "waiting_on": WAITING_ON[0] if extra_collective > extra_own else WAITING_ON[1],
                "cause_host": str(cause["host"]),
                "cause_own_ms": float(cause["own_ms"]),
            }
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)
