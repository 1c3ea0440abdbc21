"""Grouped reductions over plain arrays: what pandas' ``groupby`` gives for the per-step tables
of many hosts (stragglers, host skew), without building a pandas grouping.

The results are pandas' own: groups sorted by their keys, ``median`` skipping NaN (the middle
value, or the mean of the two middle values, ``(lower + upper) / 2``; NaN for a group of NaNs
only), ``first_max``/``first_min`` the first row (in the rows' order) holding the group's largest
or smallest value, NaN skipped (``idxmax``/``idxmin``), ``distinct`` the number of different
codes (``nunique``). A pod's straggler rows are hosts x steps: pandas' grouping cost most of the
parent's time for them, a few sorts of integer arrays cost a fraction of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


class Groups:
    """Rows grouped by integer ``keys`` (the first the primary key), groups in key order."""

    def __init__(self, keys: list[np.ndarray]) -> None:
        import numpy as np

        count = len(keys[0])
        # stable: rows of a group keep their order
        self.order = _stable_order(keys) if count else np.zeros(0, np.intp)
        ordered = [key[self.order] for key in keys]
        change = np.zeros(count, dtype=bool)
        if count:
            change[0] = True
            for key in ordered:
                change[1:] |= key[1:] != key[:-1]
        self.starts = np.flatnonzero(change)
        # the group of each row, in ``order``
        self.group = np.cumsum(change) - 1
        self.keys = [key[self.starts] for key in ordered]

    def __len__(self) -> int:
        return len(self.starts)

    def sizes(self) -> np.ndarray:
        import numpy as np

        return np.diff(np.append(self.starts, len(self.order)))

    def distinct(self, codes: np.ndarray) -> np.ndarray:
        """How many different ``codes`` (integers) each group holds."""
        import numpy as np

        if not len(self):
            return np.zeros(0, np.int64)
        ordered = codes[self.order]
        within = np.lexsort((ordered, self.group))
        group, code = self.group[within], ordered[within]
        new = np.ones(len(code), dtype=bool)
        new[1:] = (group[1:] != group[:-1]) | (code[1:] != code[:-1])
        return np.add.reduceat(new.astype(np.int64), self.starts)

    def median(self, values: np.ndarray) -> np.ndarray:
        """Each group's median of ``values`` (float64), NaN skipped."""
        import numpy as np

        if not len(self):
            return np.zeros(0, np.float64)
        ordered = values[self.order]
        sizes = self.sizes()
        if (sizes == sizes[0]).all():  # as many rows in every group (each host has each step)
            ranked = np.sort(ordered.reshape(len(sizes), int(sizes[0])), axis=1).ravel()
        else:
            ranked = ordered[np.lexsort((ordered, self.group))]
        # each group's values in order, NaN last
        counts = np.add.reduceat((~np.isnan(ranked)).astype(np.int64), self.starts)
        lower = self.starts + np.maximum(counts - 1, 0) // 2
        upper = self.starts + np.maximum(counts, 1) // 2
        lower = np.minimum(lower, len(ranked) - 1)
        upper = np.minimum(np.maximum(upper, lower), len(ranked) - 1)
        low, high = ranked[lower], ranked[upper]
        with np.errstate(over="ignore", invalid="ignore"):  # as pandas: inf past float's range
            middle = np.where(counts % 2 == 1, low, (low + high) / 2)
        return np.where(counts > 0, middle, np.nan)

    def first_max(self, values: np.ndarray) -> np.ndarray:
        """Per group, the row (an index into ``values``) of its first largest value."""
        import numpy as np

        return self._first_at(values, np.fmax)

    def first_min(self, values: np.ndarray) -> np.ndarray:
        """Per group, the row (an index into ``values``) of its first smallest value."""
        import numpy as np

        return self._first_at(values, np.fmin)

    def _first_at(self, values: np.ndarray, pick: np.ufunc) -> np.ndarray:
        import numpy as np

        if not len(self):
            return np.zeros(0, np.intp)
        ordered = values[self.order]
        best = pick.reduceat(ordered, self.starts)  # NaN skipped (NaN: a group of NaNs)
        hit = (ordered == best[self.group]) | np.isnan(best[self.group])
        at = np.flatnonzero(hit)
        first = np.ones(len(at), dtype=bool)
        first[1:] = self.group[at[1:]] != self.group[at[:-1]]
        rows: np.ndarray = self.order[at[first]]
        return rows


def _stable_order(keys: list[np.ndarray]) -> np.ndarray:
    """The rows sorted by ``keys`` (the first the primary key), ties in row order: one stable
    sort of one combined key where the keys' ranges allow it."""
    import numpy as np

    combined = np.zeros(len(keys[0]), np.int64)
    span = 1
    for key in reversed(keys):
        low, high = int(key.min()), int(key.max())
        if span * (high - low + 1) >= 2**62:
            return np.lexsort(tuple(reversed(keys)))
        combined += (key.astype(np.int64) - low) * span
        span *= high - low + 1
    return np.argsort(combined, kind="stable")


def text_codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes of a text column (-1 where missing) and the distinct texts (an object
    array) they index."""
    import numpy as np
    import pandas as pd

    codes, uniques = pd.factorize(column)
    return codes, np.asarray([str(name) for name in uniques], dtype=object)


def ranks(texts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each of the distinct ``texts``' place among them sorted (as a grouping on text sorts
    it), and the texts sorted: ``sorted[rank[code]] == texts[code]``."""
    import numpy as np

    order = np.argsort(texts, kind="stable")
    rank = np.empty(len(texts), dtype=np.int64)
    rank[order] = np.arange(len(texts))
    return rank, texts[order]
