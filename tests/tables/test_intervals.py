"""Self time and nesting of one line's events (``xlaprof.tables.intervals.nesting``) on real
captures' lines, against a plain walk of every event with a stack of open events."""

from __future__ import annotations

from typing import Any

import numpy as np


def _walk(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reference: every event in start order (the longer first), nested in the innermost
    open event that contains it."""
    own = (ends - starts).astype(np.float64)
    parent = np.full(len(starts), -1, dtype=np.int64)
    stack: list[int] = []
    for index in np.lexsort((-ends, starts)).tolist():
        while stack and ends[stack[-1]] <= starts[index]:
            stack.pop()
        if stack and ends[index] <= ends[stack[-1]]:
            own[stack[-1]] -= ends[index] - starts[index]
            parent[index] = stack[-1]
        stack.append(index)
    return own, parent


def test_nesting_is_the_walk_of_every_event(traces: dict[str, Any], jax_trace: Any) -> None:
    from xlaprof.tables.intervals import nesting

    nested = lines = 0
    for trace in [*traces.values(), jax_trace]:
        events = trace.events
        for _, group in events.groupby(["host", "plane", "line"], observed=True):
            starts = group["start_ns"].to_numpy()
            ends = group["end_ns"].to_numpy()
            own, parent = nesting(starts, ends)
            expected_own, expected_parent = _walk(starts, ends)
            assert parent.tolist() == expected_parent.tolist()
            assert own.tolist() == expected_own.tolist()
            nested += int((parent >= 0).sum())
            lines += 1
    assert nested > 1000 and lines > 50  # lines with nesting and lines without were checked
