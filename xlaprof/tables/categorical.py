"""Comparisons on an event frame's categorical columns, answered per category, not per row.

Event frames hold a million rows or more per host, and their text columns (``host``, ``line``,
``name``, ``plane_kind``, ...) are categoricals with a few hundred distinct values. Comparing
``column.astype(str) == value`` first builds a million strings (pandas' Arrow strings make that
most of a second per column); these helpers compare the categories once and spread the answer
to the rows through the categorical codes. Plain (non-categorical) columns are compared as
strings, as before.

Grouping goes the same way: a column's integer codes (``codes``, ``coded``), one code per
distinct tuple of several columns' codes in order of first appearance (``group_codes``: what
``groupby(sort=False, dropna=False)`` numbers), and each group's rows in ``groupby``'s order
(``groups_of``), so a table is built per group of rows without a frame per group. ``repeated``
builds a column of a few values each repeated, typed as pandas types the whole list; ``firsts``
is each group's first known value of an object column (pandas' grouped ``first``).

Tables are built from codes too: ``from_codes`` makes a categorical of per-code values (each
worked out once per distinct value), ``typed`` a column typed as pandas types the list of its
rows' values, ``plain`` a categorical back as the plain column of its values; ``refactorize``
renumbers codes as ``pd.factorize`` numbers values, ``text_codes`` gives several columns one
code space, ``first_values`` is ``firsts`` read from a categorical's codes. ``flagged`` answers
several text tests in one pass over the rows, ``equals_at`` one test at a few rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


def _per_category(column: pd.Series, test: Callable[[str], Any], dtype: Any) -> np.ndarray:
    """``test(str(value))`` for every row, evaluated once per category (missing -> test('')
    is not called: False or NaN)."""
    import numpy as np
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        answers = [test(str(c)) for c in column.array.categories]
        missing = False if dtype is bool else 0 if np.dtype(dtype).kind in "iu" else np.nan
        table = np.array([*answers, missing], dtype=dtype)
        codes: np.ndarray = column.array.codes
        if dtype is bool:
            return _spread(table, codes)
        from xlaprof.parse.xplane.wire import take

        # code -1 (missing) -> the last entry. The compiled gather reads the int8/int16 codes
        # as they are; np.take would first copy them as int64 (8 bytes a row: 29 MB on an
        # 80 MB host), and indexing casts them piece by piece.
        return take(table, codes)
    values = column.astype(str).to_numpy()
    return np.array([test(v) for v in values], dtype=dtype) if len(values) else np.zeros(0, dtype)


def _spread(table: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """``table[codes]`` for a boolean answer per category (and False for code -1, the last
    entry): by comparing the codes with the few categories that differ from the rest where
    there are few (a comparison is several times cheaper than a lookup per row)."""
    import numpy as np

    answers = table[:-1]
    hits = np.flatnonzero(answers)
    # one answer for every row (a line no row is on, a capture's one host): no row is read
    # beyond a missing one (whose answer is False)
    if not len(hits):
        return np.zeros(len(codes), dtype=bool)
    if len(hits) == len(answers) and codes.min(initial=0) >= 0:
        return np.ones(len(codes), dtype=bool)
    found: np.ndarray
    if len(hits) <= _FEW:
        found = codes == hits[0]
        for hit in hits[1:].tolist():
            found |= codes == hit
        return found
    misses = np.flatnonzero(~answers)
    if len(misses) <= _FEW:
        found = codes >= 0
        for miss in misses.tolist():
            found &= codes != miss
        return found
    from xlaprof.parse.xplane.wire import take

    return take(table, codes)  # (not np.take: see _per_category)


# How many categories are compared one by one rather than looked up per row.
_FEW = 4


def flagged(column: pd.Series, tests: list[Callable[[str], bool]]) -> tuple[np.ndarray, np.ndarray]:
    """Several text tests at once (eight at most), each answered once per category: the rows
    where any holds, and per such row bit i set where ``tests[i]`` holds for its text (a
    missing value: none)."""
    import numpy as np

    def bits(text: str) -> int:
        return sum(1 << i for i, test in enumerate(tests) if test(text))

    found = np.flatnonzero(_per_category(column, lambda text: bits(text) > 0, bool))
    if not len(found):
        return found, np.zeros(0, np.uint8)
    return found, _per_category(column.iloc[found], bits, np.uint8)


def equals(column: pd.Series, value: object) -> np.ndarray:
    """``column == value`` compared as text: a boolean array, one per row (all False for
    ``None``: a missing value equals nothing)."""
    import numpy as np
    import pandas as pd

    if value is None:
        return np.zeros(len(column), bool)

    if not isinstance(column.dtype, pd.CategoricalDtype):
        return (column.astype(str) == str(value)).to_numpy()
    wanted = str(value)
    return _per_category(column, lambda text: text == wanted, bool)


def equals_at(column: pd.Series, value: object, rows: np.ndarray) -> np.ndarray:
    """``equals(column, value)[rows]``, reading only ``rows``."""
    import numpy as np
    import pandas as pd

    if value is None:
        return np.zeros(len(rows), bool)
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return (column.iloc[rows].astype(str) == str(value)).to_numpy()
    wanted = str(value)
    table = np.array([str(c) == wanted for c in column.array.categories] + [False], dtype=bool)
    from xlaprof.parse.xplane.wire import take

    return take(table, column.array.codes[rows])


def member(column: pd.Series, values: Iterable[object]) -> np.ndarray:
    """``column.isin(values)`` compared as text: a boolean array, one per row."""
    import pandas as pd

    wanted = {str(v) for v in values}
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return column.astype(str).isin(wanted).to_numpy()
    return _per_category(column, lambda text: text in wanted, bool)


def matches(column: pd.Series, pattern: re.Pattern[str]) -> np.ndarray:
    """``pattern.search`` on each row's text: a boolean array, one per row (missing: False)."""
    return _per_category(column, lambda text: bool(pattern.search(text)), bool)


def numbers(column: pd.Series) -> np.ndarray:
    """Each row's text as a number (float; NaN where it is not one), parsed once per
    category: what ``pd.to_numeric(column.astype(str), errors="coerce")`` gives."""
    import pandas as pd

    def parse(text: str) -> float:
        value = pd.to_numeric(pd.Series([text]), errors="coerce").iloc[0]
        return float(value)

    return _per_category(column, parse, float)


def contains(column: pd.Series, pattern: str) -> np.ndarray:
    """``column.astype(str).str.contains(pattern)`` (a regular expression): a boolean array."""
    import re

    compiled = re.compile(pattern)
    return _per_category(column, lambda text: compiled.search(text) is not None, bool)


def codes(column: pd.Series) -> np.ndarray:
    """A column's values as integer codes: equal values, equal codes; missing (None, NaN): -1.
    A categorical's own codes (no value is read), else ``pd.factorize``'s."""
    return coded(column)[0]


def coded(column: pd.Series) -> tuple[np.ndarray, list[Any]]:
    """``codes(column)`` and the distinct value of each code (a categorical's categories)."""
    import numpy as np
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.array.codes, column.array.categories.tolist()
    if _one_text(column):  # a table's session or host: one value in every row
        return np.zeros(len(column), dtype=np.intp), [column.iloc[0]]
    found, distinct = pd.factorize(column)
    return found, list(distinct)


def _one_text(column: pd.Series) -> bool:
    """Whether a text column (pandas' Arrow strings) holds one value in every row, none
    missing: asked of Arrow directly, which is cheaper than numbering its rows."""
    import pandas as pd

    dtype = column.dtype
    if not (isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow" and len(column)):
        return False
    import pyarrow.compute as pc

    arrow = column.array.__arrow_array__()
    return arrow.null_count == 0 and bool(pc.all(pc.equal(arrow, arrow[0])).as_py())


def present(column: pd.Series) -> np.ndarray:
    """``column.notna()`` as a boolean array (a categorical's from its codes)."""
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        found: np.ndarray = column.array.codes >= 0
        return found
    return column.notna().to_numpy()


def from_codes(codes: np.ndarray, values: list[Any]) -> pd.Categorical:
    """A categorical of ``values[code]`` per row (code -1, or a missing value: missing):
    equal values one category however often ``values`` lists them, categories only for the
    values some row has, in the order ``values`` lists them. No value is read per row."""
    import numpy as np
    import pandas as pd

    codes = np.asarray(codes, dtype=np.int64)
    used = np.bincount(codes + 1, minlength=len(values) + 1)[1:] > 0
    remap = np.full(len(values) + 1, -1, dtype=np.int64)  # the last entry: code -1
    seen: dict[Any, int] = {}
    for at in np.flatnonzero(used).tolist():
        value = values[at]
        if not pd.isna(value):
            remap[at] = seen.setdefault(value, len(seen))
    dtype = pd.CategoricalDtype(pd.Index(list(seen)))
    return pd.Categorical.from_codes(remap[codes], dtype=dtype, validate=False)


def refactorize(codes: np.ndarray, values: list[Any]) -> tuple[np.ndarray, list[Any]]:
    """``pd.factorize`` of ``values[code]`` per row (code -1: a missing value), found from the
    codes: codes 0, 1, ... in order of first appearance of each distinct value, -1 where
    missing, and the distinct values in that order. ``values`` holds distinct values."""
    import numpy as np
    import pandas as pd

    codes = np.asarray(codes, dtype=np.int64)
    missing = np.array([pd.isna(v) for v in values] + [True], dtype=bool)
    known = np.where(missing[codes], -1, codes)
    found, distinct = pd.factorize(known)
    listed = distinct.tolist()
    if -1 in listed:  # the missing rows: -1, the codes after theirs one less
        gap = listed.index(-1)
        found = np.where(found == gap, -1, found - (found > gap))
        listed.remove(-1)
    return found, [values[v] for v in listed]


def group_codes(keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the code of its tuple of ``keys`` (integers: codes, -1 a value like the others,
    or any integers, such as step numbers):
    0, 1, ... in order of first appearance (as ``groupby(sort=False)`` orders groups), and the
    first row of each code.

    The keys are combined into one integer while their ranges' product fits, and numbered
    once (``pd.factorize``); a key that would overflow the product is added after numbering
    what came before."""
    import numpy as np
    import pandas as pd

    group = np.zeros(len(keys[0]), np.int64)
    span = 1  # the values ``group`` can hold: 0 .. span - 1
    numbered = True  # whether ``group`` is already 0, 1, ... in order of first appearance
    for key in keys:
        if not len(key):
            continue
        low, high = int(key.min()), int(key.max())
        if low == high:
            continue  # one value: it splits no group
        key = np.asarray(key, dtype=np.int64)
        width = high - low + 1
        if span * width >= 1 << 62:
            group = pd.factorize(group)[0]
            span = int(group.max()) + 1
        if span * width >= 1 << 62:  # a key of far-apart integers: numbered first
            key = pd.factorize(key)[0]
            low, width = 0, int(key.max()) + 1
        group = group * width + (key - low)
        span *= width
        numbered = False
    if not numbered:
        group = pd.factorize(group)[0]
    if not len(group):
        return group, group
    # codes are numbered as they first appear: a code's first row is where the running
    # maximum of the codes grows (no sort)
    grows = np.concatenate([[True], group[1:] > np.maximum.accumulate(group)[:-1]])
    return group, np.flatnonzero(grows)


def groups_of(frame: pd.DataFrame, names: list[str]) -> list[tuple[tuple[Any, ...], np.ndarray]]:
    """``frame.groupby(names, observed=True, sort=True)``'s keys, in its order, each with its
    rows (positions, ascending): found through the columns' codes, so no group's frame is
    built. Rows with a missing key are in no group, as in ``groupby``."""
    import numpy as np

    keys = [codes(frame[name]) for name in names]
    rows = np.flatnonzero(np.logical_and.reduce([key >= 0 for key in keys]))
    if not len(rows):
        return []
    group, first_rows = group_codes([key[rows] for key in keys])
    parts = split_groups(rows, group, len(first_rows))
    if len(parts) == 1:  # one group (a capture's one host and device): its key is any row's
        return [(tuple(frame[name].iloc[int(rows[0])] for name in names), rows)]
    # pandas orders the groups (a categorical by its categories), on one row per group
    heads = frame[names].take(rows[first_rows]).reset_index(drop=True)
    return [
        (tuple(key), parts[int(head.index[0])])
        for key, head in heads.groupby(names, observed=True, sort=True)
    ]


def typed(values: list[Any], codes: np.ndarray) -> Any:
    """``values[code]`` per row as one column (a pandas array), typed as pandas types the list
    of those rows (inferred from ``values``: list only values some row has), without building
    that list."""
    import pandas as pd

    return pd.Series(values, dtype=None if values else object).array.take(codes)


def text_codes(columns: list[pd.Series]) -> list[np.ndarray]:
    """Codes of several columns compared as text, one code space for all: equal text, equal
    code in whichever column; a missing value -1 (in every column alike)."""
    import numpy as np

    space: dict[str, int] = {}
    found = []
    for column in columns:
        codes, values = coded(column)
        lookup = np.array(
            [*(space.setdefault(str(v), len(space)) for v in values), -1], dtype=np.int64
        )
        found.append(lookup[codes])
    return found


def split_groups(rows: np.ndarray, group: np.ndarray, groups: int) -> list[np.ndarray]:
    """``rows`` split by their ``group`` (codes 0 .. ``groups`` - 1, each used): each group's
    rows in their order, the groups in code order."""
    import numpy as np

    if groups == 1:
        return [rows]
    bounds = np.cumsum(np.bincount(group))[:-1]
    if (group[1:] >= group[:-1]).all():  # in code order already: no sort, no copy
        return np.split(rows, bounds)
    # a stable sort of small integers (a radix sort)
    small = group.astype(np.uint16) if groups <= 1 << 16 else group
    return np.split(rows[np.argsort(small, kind="stable")], bounds)


def repeated(values: list[Any], counts: list[int]) -> Any:
    """Each of ``values`` ``counts`` times over, as one column (a pandas array): typed as
    pandas types the whole list (inferred from the same values), without building it."""
    import numpy as np
    import pandas as pd

    every = np.repeat(np.arange(len(values)), counts)
    return pd.Series(values, dtype=None if values else object).array.take(every)


def firsts(values: np.ndarray, group: np.ndarray, groups: int) -> np.ndarray:
    """Per group, its first value that is not missing, None where it has none: what pandas'
    grouped ``first`` gives an object column, without a groupby."""
    import numpy as np
    import pandas as pd

    present = np.flatnonzero(pd.notna(values))
    first = np.full(groups, len(values), dtype=np.int64)
    np.minimum.at(first, group[present], present)
    found = np.full(groups, None, dtype=object)
    known = first < len(values)
    found[known] = values[first[known]]
    return found


def first_values(
    column: pd.Series, rows: np.ndarray, group: np.ndarray, heads: np.ndarray
) -> np.ndarray:
    """``firsts`` of ``column`` at ``rows`` (an object array: a categorical's values, None
    where a group has none; ``heads``: each group's first position in ``rows``), a
    categorical's found from its codes: a group whose first row has a value takes it, only
    the others are searched."""
    import numpy as np
    import pandas as pd

    groups = len(heads)
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return firsts(column.take(rows).astype(object).to_numpy(), group, groups)
    codes = column.array.codes[rows]
    first = np.where(codes[heads] >= 0, heads, len(rows))
    unknown = first == len(rows)
    if unknown.any():
        present = np.flatnonzero((codes >= 0) & unknown[group])
        np.minimum.at(first, group[present], present)
    found = np.full(groups, None, dtype=object)
    known = first < len(rows)
    values = np.asarray(column.array.categories.astype(object), dtype=object)
    found[known] = values[codes[first[known]]]
    return found


def plain(column: pd.Series) -> pd.Series:
    """A categorical column as the plain column of the same values (its categories' type:
    text for text), as pandas types a column of those values; other columns as they are."""
    import pandas as pd

    if not isinstance(column.dtype, pd.CategoricalDtype):
        return column.reset_index(drop=True)
    return column.astype(column.array.categories.dtype).reset_index(drop=True)
