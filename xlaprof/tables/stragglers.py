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

    from xlaprof.model.ondisk import StepRows

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

    Computed per group with grouped reductions over arrays (``tables.grouped``: no Python
    step per group, no pandas grouping), so a pod's rows can be taken a range of steps at a
    time as arrays (``stragglers_of``, ``xlaprof.inputs.pod.step_tables``).
    """
    import pandas as pd

    if host_steps is None or host_steps.empty:
        return pd.DataFrame(columns=COLUMNS)
    return stragglers_of(step_rows(host_steps))


def step_rows(host_steps: pd.DataFrame) -> StepRows:
    """``host_steps``' rows with a step (as a grouping on the step keeps them), as arrays."""
    import numpy as np

    from xlaprof.model.ondisk import StepRows
    from xlaprof.tables.grouped import text_codes

    host_steps = host_steps[host_steps["step"].notna().to_numpy()]
    host, hosts = text_codes(host_steps["host"])
    device, devices = text_codes(host_steps["device"])
    wall, collective, own = (
        host_steps[column].to_numpy(dtype="float64", na_value=np.nan)
        for column in ("wall_ms", "collective_ms", "own_ms")
    )
    step = host_steps["step"].to_numpy(dtype=np.int64)
    return StepRows(host, hosts, device, devices, step, wall, collective, own)


def stragglers_of(rows: StepRows) -> pd.DataFrame:
    """``stragglers`` of straggler rows held as arrays (a pod's, a range of steps at a time)."""
    import numpy as np
    import pandas as pd

    from xlaprof.tables.grouped import Groups, ranks

    named = (rows.host >= 0) & (rows.device >= 0)  # as a grouping: a row of no host or device
    if not named.all():  # is in no group
        rows = rows.take(named)
    if not len(rows):
        return pd.DataFrame(columns=COLUMNS)
    rank, devices = ranks(rows.devices)
    wall, collective, own = rows.wall_ms, rows.collective_ms, rows.own_ms
    groups = Groups([rows.step, rank[rows.device]])
    counted = groups.distinct(rows.host)
    keep = counted >= 2
    slowest = groups.first_max(wall)[keep]
    cause = groups.first_max(own)[keep]
    median = groups.median(wall)[keep]
    behind = wall[slowest] - median
    late = behind > 0
    extra_collective = collective[slowest] - groups.median(collective)[keep]
    extra_own = own[slowest] - groups.median(own)[keep]
    waiting = np.where(extra_collective > extra_own, WAITING_ON[0], WAITING_ON[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(median > 0, behind / np.where(median > 0, median, 1.0), np.nan)
    table = pd.DataFrame(
        {
            "step": groups.keys[0][keep].astype("int64"),
            "device": pd.Index(devices[groups.keys[1][keep]], dtype=object).astype(str),
            "hosts": counted[keep].astype("int64"),
            "slowest_host": _where(late, rows.hosts[rows.host[slowest]]),
            "slowest_ms": wall[slowest],
            "median_ms": median,
            "behind_ms": behind,
            "behind": share,
            "collective_ms": collective[slowest],
            "own_ms": own[slowest],
            "waiting_on": _where(late, waiting),
            "cause_host": _where(late, rows.hosts[rows.host[cause]]),
            "cause_own_ms": np.where(late, own[cause], np.nan),
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
