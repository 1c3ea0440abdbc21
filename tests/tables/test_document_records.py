"""A table's rows in the ``--json`` document (``tables.document.records``), made a column at a
time, hold the values pandas' own ``to_dict(orient="records")`` gives the frame cast to objects,
made strict by ``strict_json`` (the way the rows were made before): the same keys, values and
types, on frames of every column kind the tables have."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from xlaprof.report.json_out import dumps
from xlaprof.tables.document import StrictRows, records, strict_document, strict_json

ROWS = st.integers(0, 12)
# numpy's, pandas' nullable ones, its two text dtypes (missing: NaN, NA), and the rest
KINDS = ["float", "int", "uint", "bool", "Int64", "UInt8", "boolean", "str", "string"]
KINDS += ["category", "object"]
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)
CELLS = st.one_of(
    st.none(),
    st.just(pd.NA),
    st.text(max_size=4),
    st.integers(-(2**40), 2**40),
    FLOATS,
    # numpy's own scalars, as an object column built from arrays holds them
    st.integers(-(2**40), 2**40).map(np.int64),
    FLOATS.map(np.float64),
    st.booleans().map(np.bool_),
    st.lists(FLOATS, max_size=3),
    st.tuples(st.integers(0, 9), FLOATS),
    st.dictionaries(st.integers(0, 3), FLOATS, max_size=2),
)


@st.composite
def columns(draw: st.DrawFn, rows: int) -> pd.Series:
    """One column of ``rows`` values, of a kind the analysis' tables have."""
    kind = draw(st.sampled_from(KINDS))
    if kind == "float":
        return pd.Series(draw(st.lists(FLOATS, min_size=rows, max_size=rows)), dtype=np.float64)
    if kind in ("int", "uint"):
        low = 0 if kind == "uint" else -(2**62)
        values = draw(st.lists(st.integers(low, 2**62), min_size=rows, max_size=rows))
        return pd.Series(values, dtype=np.uint64 if kind == "uint" else np.int64)
    if kind == "bool":
        return pd.Series(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)), dtype=bool)
    if kind == "Int64":
        whole = st.none() | st.integers(-(2**40), 2**40)
        return pd.Series(draw(st.lists(whole, min_size=rows, max_size=rows)), dtype="Int64")
    if kind == "UInt8":
        small = st.none() | st.integers(0, 255)
        return pd.Series(draw(st.lists(small, min_size=rows, max_size=rows)), dtype="UInt8")
    if kind == "boolean":
        truth = st.none() | st.booleans()
        return pd.Series(draw(st.lists(truth, min_size=rows, max_size=rows)), dtype="boolean")
    if kind in ("str", "string"):
        # pandas' default text dtype (missing: NaN) and its nullable one (missing: NA)
        text = st.none() | st.text(max_size=4)
        return pd.Series(draw(st.lists(text, min_size=rows, max_size=rows)), dtype=kind)
    if kind == "category":
        values = draw(st.lists(st.none() | st.sampled_from("abc"), min_size=rows, max_size=rows))
        return pd.Series(values, dtype="category")
    return pd.Series(draw(st.lists(CELLS, min_size=rows, max_size=rows)), dtype=object)


@st.composite
def frames(draw: st.DrawFn) -> pd.DataFrame:
    """A table: a few columns of one length, named by text or, now and then, a number."""
    rows = draw(ROWS)
    names = draw(st.lists(st.text(min_size=1, max_size=3) | st.integers(0, 5), max_size=5))
    unique = list(dict.fromkeys(names))
    return pd.DataFrame({name: draw(columns(rows)) for name in unique})


def same(a: object, b: object) -> bool:
    """Equal with the same types all the way down (1 == 1.0 == True would hide a change)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)  # type: ignore[index]
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))  # type: ignore[arg-type]
    return a == b


@settings(max_examples=150, deadline=None)
@given(frames())
def test_rows_are_pandas_own_made_strict(frame: pd.DataFrame) -> None:
    expected = [strict_document(row) for row in frame.astype(object).to_dict(orient="records")]
    rows = records(frame)
    assert isinstance(rows, StrictRows)
    assert same(list(rows), expected)
    # Taken as they are by strict_json, and written as the plain list's rows are.
    assert strict_json(rows) is rows
    assert json.loads(dumps({"table": rows})) == json.loads(dumps({"table": expected}))
    assert dumps({"table": rows}) == dumps({"table": expected})


def test_rows_of_a_frame_without_columns_and_of_none() -> None:
    assert records(None) is None
    assert list(records(pd.DataFrame(index=range(3))) or []) == [{}, {}, {}]


def test_not_finite_numbers_become_null() -> None:
    frame = pd.DataFrame({"x": [1.5, np.nan, np.inf, -np.inf], "n": pd.array([1, None, 3, 4])})
    assert list(records(frame) or []) == [
        {"x": 1.5, "n": 1},
        {"x": None, "n": None},
        {"x": None, "n": 3},
        {"x": None, "n": 4},
    ]
