"""Per host (or per device) and step: when each step started and ended, its wall time and
where the step came from (``Trace.step_times``, the host skew, the timeline's device windows).

Times are in seconds (``wall_s``, ``busy_s``), as in every other table; ``wall_ms`` and
``busy_ms`` stay beside them for those who read ``Trace.step_times`` before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

    parts = []
    bounds = trace.step_bounds
    if bounds is not None and not bounds.empty:
        frame = bounds.copy()
        frame["wall_ms"] = (frame["end_ns"] - frame["start_ns"]) / 1e6
        frame["wall_s"] = (frame["end_ns"] - frame["start_ns"]) / 1e9
        if trace.partial_edges:
            edges = frame.groupby("host", observed=True)["step"].agg(["min", "max"])
            first = frame["host"].map(edges["min"]).astype("Int64")
            last = frame["host"].map(edges["max"]).astype("Int64")
            frame = frame[(frame["step"] != first) & (frame["step"] != last)]
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
