"""Per host (or per device) and step: when each step started and ended, its wall time and
where the step came from (``Trace.step_times``, the host skew, the timeline's device windows).

Times are in seconds (``wall_s``, ``busy_s``), as in every other table; ``wall_ms`` and
``busy_ms`` stay beside them for those who read ``Trace.step_times`` before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np
    import pandas as pd

    from xlaprof.model.trace import Trace

STEP_TIME_COLUMNS = [
    "session",
    "host",
    "step",
    "start_ns",
    "end_ns",
    "wall_ms",
    "source",
    "device",
    "wall_s",
]
DEVICE_STEP_TIME_COLUMNS = [
    "session",
    "host",
    "device",
    "step",
    "start_ns",
    "end_ns",
    "wall_ms",
    "busy_ms",
    "source",
    "wall_s",
    "busy_s",
]


def step_times(trace: Trace, per_device: bool = False) -> pd.DataFrame:
    """Per host and step: start, end and wall time, and where the step came from.

    Hosts with step markers: boundary to boundary (``source`` "host steps"). Hosts without:
    from their devices' own steps (``Steps`` line, else module executions), the slowest
    device of the host giving the step's time (``device`` names it). Devices' steps are
    never stitched together. A capture that starts and stops mid-step
    (``Trace.partial_edges``) leaves out each host's first and last step.

    ``per_device``: one row per device and step instead (``DEVICE_STEP_TIME_COLUMNS``):
    each device's own steps, with its busy time, from whichever source it has (a device
    with no steps at all has one "whole capture" row, step <NA>).
    """
    if per_device:
        return device_step_times(trace)
    import pandas as pd

    from xlaprof.tables.grouped import text_codes

    parts = []
    bounds = trace.step_bounds
    if bounds is not None and not bounds.empty:
        frame = bounds.copy()
        frame["wall_ms"] = (frame["end_ns"] - frame["start_ns"]) / 1e6
        frame["wall_s"] = (frame["end_ns"] - frame["start_ns"]) / 1e9
        if trace.partial_edges:
            host, hosts = text_codes(frame["host"])
            frame = frame[whole_steps(host, hosts, frame["step"].to_numpy(), step_edges(frame))]
        frame["source"] = "host steps"
        frame["device"] = None
        parts.append(frame)
    marked = set() if bounds is None else set(bounds["host"].astype(str))
    steps = trace.device_steps()
    steps = steps[
        ~steps["host"].astype(str).isin(marked)
        & steps["step"].notna()
        & (steps["step_source"] != "whole capture")
    ]
    if not steps.empty:
        slowest = steps.loc[steps.groupby(["session", "host", "step"])["wall_s"].idxmax()]
        parts.append(
            pd.DataFrame(
                {
                    "session": slowest["session"],
                    "host": slowest["host"],
                    "step": slowest["step"],
                    "start_ns": slowest["start_ns"],
                    "end_ns": slowest["end_ns"],
                    "wall_ms": slowest["wall_s"] * 1e3,
                    "wall_s": slowest["wall_s"],
                    "source": slowest["step_source"],
                    "device": slowest["device"],
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=STEP_TIME_COLUMNS)
    result = pd.concat([p[STEP_TIME_COLUMNS] for p in parts], ignore_index=True)
    result["host"] = result["host"].astype(str).astype("category")
    result["step"] = result["step"].astype("Int64")
    return result.sort_values(["host", "step"], ignore_index=True)


def step_edges(bounds: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Per host, its first and last host step (``bounds``: its step boundaries, columns host and
    step): the steps a capture that starts and stops mid-step cuts (``Trace.partial_edges``),
    so not whole steps to compare across hosts."""
    edges = bounds.groupby("host", observed=True)["step"].agg(["min", "max"])
    return {
        str(host): (int(first), int(last))
        for host, first, last in zip(edges.index, edges["min"], edges["max"], strict=True)
    }


def whole_steps(
    host: np.ndarray, hosts: np.ndarray, step: np.ndarray, edges: Mapping[str, tuple[int, int]]
) -> np.ndarray:
    """Which rows are whole steps: neither their host's first nor its last step in ``edges``
    (``step_edges``; a host not in it: every step). ``host``: codes into ``hosts`` (names)."""
    import numpy as np

    known = np.asarray([str(name) in edges for name in hosts] + [False], dtype=bool)
    first, last = (
        np.asarray([edges.get(str(name), (0, 0))[at] for name in hosts] + [0], dtype=np.int64)
        for at in (0, 1)
    )
    # a code of -1 (no host) reads the last entry, which is not known: a whole step
    step = np.asarray(step, dtype=np.int64)
    whole: np.ndarray = ~known[host] | ((step != first[host]) & (step != last[host]))
    return whole


def device_step_times(trace: Trace) -> pd.DataFrame:
    """Per device and step (``DEVICE_STEP_TIME_COLUMNS``): each device's own steps, with its
    wall and busy time and where its steps came from."""
    import pandas as pd

    steps = trace.device_steps()
    if steps.empty:
        return pd.DataFrame(columns=DEVICE_STEP_TIME_COLUMNS)
    table = steps.assign(
        wall_ms=steps["wall_s"] * 1e3,
        busy_ms=steps["busy_s"] * 1e3,
        source=steps["step_source"],
    )[DEVICE_STEP_TIME_COLUMNS]
    return table.sort_values(["host", "device", "start_ns"], ignore_index=True)
