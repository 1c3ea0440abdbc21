"""Interval arithmetic on event times, in numpy: the union of many intervals and how much of
any window it covers (``Coverage``), and each event's self time (its time minus nested events').
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


@dataclass
class Coverage:
    """A union of intervals, answering "how much of [a, b) is covered" for many windows."""

    starts: np.ndarray
    ends: np.ndarray
    before: np.ndarray  # covered length before each block
    # the blocks with an empty one ahead (``upto``), made when first asked
    _ahead: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(
        default=None, repr=False, compare=False
    )

    @classmethod
    def of(cls, starts: np.ndarray, ends: np.ndarray) -> Coverage:
        import numpy as np

        if len(starts) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return cls(empty, empty, empty)
        if (starts[1:] >= starts[:-1]).all():  # in order already (a union grown in turn)
            s, e = starts, ends
        else:
            order = np.argsort(starts, kind="stable")
            s, e = starts[order], ends[order]
        reach = np.maximum.accumulate(e)
        new = np.concatenate([[True], s[1:] > reach[:-1]])
        first = np.flatnonzero(new)
        last = np.concatenate([first[1:] - 1, [len(s) - 1]])
        block_starts, block_ends = s[first], reach[last]
        lengths = block_ends - block_starts
        before = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        return cls(block_starts, block_ends, before)

    def upto(self, t: np.ndarray) -> np.ndarray:
        """Covered length in (-inf, t) for each t: the length before the last block starting
        at or before t, and the part of that block before t. The blocks are looked up with
        an empty block ahead of the first (at its start), so a t before every block needs no
        case of its own."""
        import numpy as np

        if len(self.starts) == 0:
            return np.zeros(len(t), dtype=np.int64)
        if self._ahead is None:
            first = self.starts[:1]
            self._ahead = (
                np.concatenate([first, self.starts]),
                np.concatenate([first, self.ends]),
                np.concatenate([[0], self.before]),
            )
        starts, ends, before = self._ahead
        i = np.searchsorted(self.starts, t, side="right")  # 0: the empty block ahead
        covered: np.ndarray = before[i] + np.maximum(np.minimum(t, ends[i]) - starts[i], 0)
        return covered

    def within(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        covered: np.ndarray = self.upto(b) - self.upto(a)
        return covered

    @property
    def total(self) -> int:
        return int((self.ends - self.starts).sum())


def self_times_ns(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Duration minus the time of events nested inside (one line's events, any order)."""
    return nesting(starts, ends)[0]


def nesting(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each event's self time (duration minus the events nested directly inside it) and its
    parent: the index of the innermost event it lies within, or -1 (one line's events).

    In start order (the longer first on a tie), an event that starts at or after every earlier
    event's end nests in none of them and empties the stack of open events: the events split
    into such blocks, and only blocks of two or more events are walked (``_nest``)."""
    import numpy as np

    own: np.ndarray = (ends - starts).astype(np.float64)
    parent = np.full(len(starts), -1, dtype=np.int64)
    if len(starts) < 2:
        return own, parent
    order = _start_order(starts, ends)  # None: in that order already
    ordered_starts = starts if order is None else starts[order]
    reach = np.maximum.accumulate(ends if order is None else ends[order])
    alone = np.concatenate([[True], ordered_starts[1:] >= reach[:-1]])
    if alone.all():  # no event overlaps another: none nests
        return own, parent
    block = np.cumsum(alone) - 1
    crowded = np.bincount(block)[block] > 1
    rows = np.flatnonzero(crowded) if order is None else order[crowded]
    _nest(starts, ends, rows, own, parent)
    return own, parent


def _start_order(starts: np.ndarray, ends: np.ndarray) -> np.ndarray | None:
    """The events in start order, the longer first on a tie (``np.lexsort((-ends, starts))``,
    stable); None where they are in that order already (a line's events mostly come in time
    order)."""
    import numpy as np

    later = starts[1:] - starts[:-1]
    if (later > 0).all() or ((later >= 0) & ((later > 0) | (ends[1:] <= ends[:-1]))).all():
        return None
    found: np.ndarray = np.lexsort((-ends, starts))
    return found


def _nest(
    starts: np.ndarray, ends: np.ndarray, order: np.ndarray, own: np.ndarray, parent: np.ndarray
) -> None:
    """The stack walk of ``nesting`` over the events at ``order`` (in that order), in place: by
    the compiled core where it is built and the lengths fit int64, else in Python (exact)."""
    import numpy as np

    from xlaprof.parse.xplane.wire import native

    core = native()
    arrays = (starts, ends, order, own, parent)
    types = (np.int64, np.int64, np.intp, np.float64, np.int64)
    if (
        core is not None
        and all(a.dtype == t and a.flags.c_contiguous for a, t in zip(arrays, types, strict=True))
        and core.nest(*arrays) is not None
    ):
        return
    stack: list[int] = []
    s_list, e_list = starts.tolist(), ends.tolist()
    for index in order.tolist():
        start, end = s_list[index], e_list[index]
        while stack and e_list[stack[-1]] <= start:
            stack.pop()
        if stack and end <= e_list[stack[-1]]:
            own[stack[-1]] -= end - start
            parent[index] = stack[-1]
        stack.append(index)
