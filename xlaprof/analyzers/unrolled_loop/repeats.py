"""Runs of identical blocks in a sequence of op signatures (see the package's docstring)."""

from __future__ import annotations

from dataclasses import dataclass

MIN_REPEATS = 4
MAX_RUNS_PER_GRAPH = 4
# Runs with this many fewer repeats than the largest one are the same layers (backward edges).
EDGE_BLOCKS = 2


@dataclass(frozen=True)
class Repeat:
    """A run of ``repeats`` identical blocks of ``block_ops`` ops starting at op ``start``."""

    start: int
    block_ops: int
    repeats: int

    @property
    def ops(self) -> int:
        return self.block_ops * self.repeats


def find_repeats(
    tokens: list[str], min_repeats: int = MIN_REPEATS, max_runs: int = MAX_RUNS_PER_GRAPH
) -> list[Repeat]:
    """Non-overlapping runs of identical blocks in ``tokens``, largest first."""
    import numpy as np

    ids = {token: number for number, token in enumerate(dict.fromkeys(tokens))}
    sequence = np.fromiter((ids[t] for t in tokens), dtype=np.int64, count=len(tokens))
    total = len(sequence)
    free = np.ones(total, dtype=bool)
    runs: list[Repeat] = []
    for _ in range(max_runs):
        best: Repeat | None = None
        for period in range(1, total // min_repeats + 1):
            same = (sequence[:-period] == sequence[period:]) & free[:-period] & free[period:]
            if not same.any():
                continue
            edges = np.diff(np.concatenate(([0], same.astype(np.int8), [0])))
            starts = np.flatnonzero(edges == 1)
            lengths = np.flatnonzero(edges == -1) - starts
            longest = int(lengths.argmax())
            repeats = (int(lengths[longest]) + period) // period
            if repeats < min_repeats:
                continue
            candidate = Repeat(int(starts[longest]), period, repeats)
            if best is None or candidate.ops > best.ops:
                best = candidate
        if best is None:
            break
        runs.append(best)
        free[best.start : best.start + best.ops] = False
    return runs
