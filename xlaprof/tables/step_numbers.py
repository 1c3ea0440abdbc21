"""Step numbers for trace events, and each host step's bounds.

On host planes, events that carry a ``step_num`` stat (``xlaprof.step``, ``xp.StepTrace``) define
steps; otherwise each torch_xla ``StepMarker`` (one per ``torch_xla.sync()``) ends a step. On
device planes, each plane's own "Steps" line defines them (never another device's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlaprof.parse.events import STEP_MARKER, STEPS_LINE
from xlaprof.tables import categorical as cols

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


def assign_steps(
    events: pd.DataFrame, first_step: int, profile_starts: dict[str, int | None] | None = None
) -> tuple[pd.arrays.IntegerArray, pd.DataFrame]:
    """A step number for every event (or <NA>), and each host step's bounds.

    See the module docstring for how steps are found. The first StepMarker-defined step begins
    when profiling began (``profile_starts``), since host time before the first marker may hold
    no events at all.
    """
    import numpy as np
    import pandas as pd

    steps = np.full(len(events), -1, dtype=np.int64)
    bounds: list[tuple[str, int, int, int]] = []
    for host in events["host"].cat.categories:
        on_host = (events["host"] == host).to_numpy()
        host_plane = on_host & (events["plane_kind"] == "host").to_numpy()
        marked = host_plane & events["step_num"].notna().to_numpy()
        if marked.any():
            _by_intervals(events, steps, host_plane, marked, labels=events["step_num"])
            starts = events["start_ns"].to_numpy()[marked]
            stops = events["end_ns"].to_numpy()[marked]
            labels = events["step_num"].to_numpy()[marked]
            bounds += [
                (host, int(n), int(a), int(b))
                for n, a, b in zip(labels, starts, stops, strict=True)
            ]
        else:
            markers = host_plane & (events["name"] == STEP_MARKER).to_numpy()
            ends = np.sort(events["end_ns"].to_numpy()[markers])
            if len(ends):
                index = np.searchsorted(ends, events["start_ns"].to_numpy(), side="left")
                inside = host_plane & (index < len(ends))
                steps[inside] = first_step + index[inside]
                begin = int(events["start_ns"].to_numpy()[host_plane].min())
                start = (profile_starts or {}).get(str(host))
                if start is not None and start <= begin:
                    begin = int(start)
                previous = [begin, *ends[:-1].tolist()]
                bounds += [
                    (host, first_step + i, int(a), int(b))
                    for i, (a, b) in enumerate(zip(previous, ends.tolist(), strict=True))
                ]
        # Each device plane's own Steps line numbers that plane's events: steps are never
        # stitched across devices (two GPUs' steps overlap in time but are not one step).
        device = on_host & (events["plane_kind"] == "device").to_numpy()
        on_steps_line = (events["line"] == STEPS_LINE).to_numpy()
        planes = events["plane"].to_numpy()
        labels = None
        for plane in pd.unique(planes[device & on_steps_line]):
            scope = device & (planes == plane)
            if labels is None:  # the Steps events' names are their step numbers
                labels = pd.Series(cols.numbers(events["name"]), index=events.index)
                labels = labels.astype("Int64")
            _by_intervals(events, steps, scope, scope & on_steps_line, labels=labels)
    frame = pd.DataFrame(bounds, columns=["host", "step", "start_ns", "end_ns"])
    frame["host"] = frame["host"].astype("category")
    numbers = pd.array(steps, dtype="Int64")
    numbers[steps < 0] = pd.NA  # in no step
    return numbers, frame


def _by_intervals(
    events: pd.DataFrame,
    steps: np.ndarray,
    scope: np.ndarray,
    definers: np.ndarray,
    labels: pd.Series,
) -> None:
    """Give each event in ``scope`` the label of the defining interval that contains it."""
    import numpy as np

    starts = events["start_ns"].to_numpy()[definers]
    ends = events["end_ns"].to_numpy()[definers]
    values = labels.to_numpy(dtype="float64", na_value=np.nan)[definers]
    order = np.argsort(starts)
    starts, ends, values = starts[order], ends[order], values[order]
    event_starts = events["start_ns"].to_numpy()
    index = np.searchsorted(starts, event_starts, side="right") - 1
    candidates = scope & (index >= 0)
    chosen = index[candidates]
    within = event_starts[candidates] <= ends[chosen]
    target = np.flatnonzero(candidates)[within]
    labelled = values[chosen[within]]
    valid = ~np.isnan(labelled)
    steps[target[valid]] = labelled[valid].astype(np.int64)
