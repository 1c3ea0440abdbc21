"""Per-host step-time skew: in synchronous training the slowest host sets every step's pace."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np
    import pandas as pd

    from xlaprof.model.ondisk import StepRows


SKEW_COLUMNS = ["step", "hosts", "fastest_host", "fastest_ms", "slowest_host", "slowest_ms", "skew"]


def host_skew(step_times: pd.DataFrame) -> pd.DataFrame:
    """Per step with more than one host: fastest and slowest host and the skew.

    ``step_times`` has columns host, step, wall_ms (``Trace.step_times()``; a pod's straggler
    rows: ``skew_of``). ``skew`` is (slowest - fastest) / fastest.
    Grouped reductions over arrays (``tables.grouped``), no Python step per step.
    """
    import numpy as np
    import pandas as pd

    from xlaprof.tables.grouped import text_codes

    if step_times is None or step_times.empty:
        return pd.DataFrame(columns=SKEW_COLUMNS)
    # as a grouping on the step: no group without a step
    step_times = step_times[step_times["step"].notna().to_numpy()]
    host, hosts = text_codes(step_times["host"])
    wall = step_times["wall_ms"].to_numpy(dtype="float64", na_value=np.nan)
    return _skew(host, hosts, step_times["step"].to_numpy(dtype=np.int64), wall)


def skew_of(rows: StepRows, marked: set[str], edges: Mapping[str, tuple[int, int]]) -> pd.DataFrame:
    """``host_skew`` of a pod's straggler rows held as arrays, a range of steps at a time: per
    host and step its wall time as ``Trace.step_times()`` gives it (the host step of a host
    with step markers, ``marked``, but for its first and last in ``edges``, ``whole_steps``;
    else its slowest device's step, (host, step) in the order first seen), so the same table
    as ``host_skew(trace.step_times())``."""
    import numpy as np
    import pandas as pd

    from xlaprof.tables.grouped import Groups
    from xlaprof.tables.step_times import whole_steps

    if not len(rows):
        return pd.DataFrame(columns=SKEW_COLUMNS)
    known = (rows.host >= 0) & (rows.device >= 0)
    is_marked = np.isin(rows.hosts, list(marked))[rows.host] & known
    on_host = (rows.devices == "host")[rows.device] & known
    own = np.flatnonzero(on_host & is_marked)
    own = own[whole_steps(rows.host[own], rows.hosts, rows.step[own], edges)]
    devices = rows.take(~on_host & ~is_marked & known)
    # each unmarked host's slowest device per step, (host, step) in the order first seen
    groups = Groups([devices.host, devices.step])
    first = groups.order[groups.starts]
    seen = np.argsort(first, kind="stable")
    slowest = (
        np.fmax.reduceat(devices.wall_ms[groups.order], groups.starts)[seen]
        if len(groups)
        else np.zeros(0)
    )
    host = np.concatenate([rows.host[own], groups.keys[0][seen]]) if len(groups) else rows.host[own]
    step = np.concatenate([rows.step[own], groups.keys[1][seen]]) if len(groups) else rows.step[own]
    wall = np.concatenate([rows.wall_ms[own], slowest])
    return _skew(host, rows.hosts, step, wall)


def _skew(host: np.ndarray, hosts: np.ndarray, step: np.ndarray, wall: np.ndarray) -> pd.DataFrame:
    """``host_skew`` of rows as arrays: host codes into ``hosts``, steps, wall times (ms)."""
    import numpy as np
    import pandas as pd

    from xlaprof.tables.grouped import Groups

    named = host >= 0  # a row of no host is in no host's steps
    if not named.all():
        host, step, wall = host[named], step[named], wall[named]
    if not len(host):
        return pd.DataFrame(columns=SKEW_COLUMNS)
    groups = Groups([step])
    counted = groups.distinct(host)
    keep = counted >= 2
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
            "hosts": counted[keep].astype(np.int64),
            "fastest_host": hosts[host[fastest]],
            "fastest_ms": fast,
            "slowest_host": hosts[host[slowest]],
            "slowest_ms": slow,
            "skew": skew,
        },
        columns=SKEW_COLUMNS,
    )
    return table
