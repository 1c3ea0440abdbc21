"""A capture's step timeline against a plain reference, per step: its wall time is its step
bounds' where it has them, else the extent of its labelled events; its compile time is the
union of its compile events' intervals and its busy time (no device plane: the host CPU's
XLA executions) the union of theirs. For events that all carry a step label and for events
of which some carry none (the timeline pairs each event with its step, and holds no copy of
the events where every event is one pair)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from xlaprof.tables.timeline import step_timeline

COMPILE, EXECUTE, OTHER = "XLAGraphExecutor::Compile", "ThunkExecutor::Execute", "aten::add"
# (start, length, step or None, name): steps from a small range, and two far apart (where the
# step numbers are not dense)
EVENT = st.tuples(
    st.integers(0, 10_000),
    st.integers(0, 500),
    st.one_of(st.none(), st.integers(-3, 6), st.sampled_from([10**6, -(10**6)])),
    st.sampled_from([COMPILE, EXECUTE, OTHER]),
)
Event = tuple[int, int, "int | None", str]


def frame_of(events: list[Event]) -> pd.DataFrame:
    rows = len(events)
    return pd.DataFrame(
        {
            "host": pd.Categorical(["h"] * rows),
            "plane_kind": pd.Categorical(["host"] * rows),
            "line": pd.Categorical(["python"] * rows),
            "name": pd.Categorical([e[3] for e in events]),
            "start_ns": np.array([e[0] for e in events], np.int64),
            "end_ns": np.array([e[0] + e[1] for e in events], np.int64),
            "step": pd.array([e[2] for e in events], dtype="Int64"),
            "step_num": pd.array([None] * rows, dtype="Int64"),
        }
    )


def union(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


def per_step(events: list[Event], names: tuple[str, ...]) -> dict[int, list[tuple[int, int]]]:
    found: dict[int, list[tuple[int, int]]] = {}
    for start, length, step, name in events:
        if step is not None and name in names:
            found.setdefault(step, []).append((start, start + length))
    return found


@settings(max_examples=120, deadline=None)
@given(st.lists(EVENT, min_size=1, max_size=40), st.data())
def test_a_captures_timeline_is_each_steps_extent_and_unions(
    events: list[Event], data: st.DataObject
) -> None:
    every = per_step(events, (COMPILE, EXECUTE, OTHER))
    steps = sorted(every)
    # the host's step bounds, for some of the steps, none or all (a step's wall is its
    # bounds' where it has them, else its events' extent)
    bounded = data.draw(st.lists(st.sampled_from(steps), unique=True) if steps else st.just([]))
    limits = {n: (n * 100, n * 100 + data.draw(st.integers(0, 1000))) for n in bounded}
    bounds = pd.DataFrame(
        {
            "host": ["h"] * len(limits),
            "step": list(limits),
            "start_ns": [begin for begin, _ in limits.values()],
            "end_ns": [end for _, end in limits.values()],
        }
    )
    timeline = step_timeline([], frame_of(events), bounds if limits else None)
    if not steps:  # no event has a step label: no traced step
        assert timeline.empty
        return
    assert timeline["step"].tolist() == steps
    walls = [
        limits[n][1] - limits[n][0]
        if n in limits
        else max(e for _, e in every[n]) - min(s for s, _ in every[n])
        for n in steps
    ]
    assert timeline["wall_s"].tolist() == [w / 1e9 for w in walls]
    executes = per_step(events, (EXECUTE,))
    busy = [union(executes.get(n, [])) / 1e9 for n in steps]
    assert timeline["device_busy_s"].tolist() == busy
    compiles = per_step(events, (COMPILE,))
    if any(e[3] == COMPILE for e in events):  # the lazy-tensor runtime's: compiles measured
        assert timeline["compile_s"].tolist() == [union(compiles.get(n, [])) / 1e9 for n in steps]
    else:  # no lazy-tensor runtime and no PJRT calls: compiles not measured
        assert all(math.isnan(v) for v in timeline["compile_s"].tolist())
