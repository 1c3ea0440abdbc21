"""Integer codes of an event frame's columns (``xlaprof.tables.categorical.codes``,
``group_codes``), checked against pandas' own grouping of the same real captures' values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st


def test_codes_partition_a_column_as_its_values_do(jax_cpu_trace: Any, jax_trace: Any) -> None:
    from xlaprof.tables.categorical import codes

    for trace in (jax_cpu_trace, jax_trace):
        events = trace.events
        for name in ("name", "line", "hlo_op", "host"):
            column = events[name]
            for values in (column, column.astype(object)):  # categorical, then plain objects
                found = codes(values)
                text = column.astype(object).to_numpy()
                missing = pd.isna(text)
                assert (found == -1).tolist() == missing.tolist()
                # one code per distinct value, and the same value always the same code
                pairs = pd.DataFrame({"code": found[~missing], "value": text[~missing]})
                assert pairs.groupby("code")["value"].nunique().eq(1).all()
                assert pairs.groupby("value")["code"].nunique().eq(1).all()


def test_group_codes_number_groups_as_groupby_does(jax_cpu_trace: Any, jax_trace: Any) -> None:
    from xlaprof.tables.categorical import codes, group_codes

    for trace in (jax_cpu_trace, jax_trace):
        events = trace.events
        keys = ["line", "name", "hlo_op"]
        group, firsts = group_codes([codes(events[k]) for k in keys])
        # pandas, on the values as text (a missing value a group of its own, "<NA>")
        text = events[keys].astype(object).fillna("<NA>")
        expected = text.groupby(keys, sort=False).ngroup().to_numpy()
        assert group.tolist() == expected.tolist()
        seen: dict[tuple[Any, ...], int] = {}
        for row, key in enumerate(text.itertuples(index=False, name=None)):
            seen.setdefault(key, row)
        assert firsts.tolist() == sorted(seen.values())
        assert np.array_equal(group[firsts], np.arange(len(firsts)))


def test_groups_of_is_groupby_without_the_frames(jax_cpu_trace: Any, jax_trace: Any) -> None:
    from xlaprof.tables.categorical import groups_of

    for trace in (jax_cpu_trace, jax_trace):
        events = trace.events
        # several groups; and one (each capture is one host): its key read from a row
        for names in (["host", "plane", "line"], ["session", "host"]):
            found = groups_of(events, names)
            expected = events.groupby(names, observed=True, sort=True).indices
            assert [key for key, _ in found] == list(expected)
            for key, rows in found:
                assert rows.tolist() == expected[key].tolist()


def test_repeated_types_a_column_as_the_whole_list(jax_trace: Any) -> None:
    from xlaprof.tables.categorical import repeated

    steps = jax_trace.step_bounds
    counts = steps["step"].to_numpy() % 3 + 1
    for values in (
        [str(h) for h in steps["host"]],  # text
        steps["step"].tolist(),  # integers
        [None if s % 2 else float(s) for s in steps["step"]],  # floats and None
        [None] * len(steps),
    ):
        listed = [v for v, n in zip(values, counts, strict=True) for _ in range(n)]
        column = pd.Series(repeated(values, counts.tolist()))
        pd.testing.assert_series_equal(column, pd.Series(listed), check_exact=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=60), st.booleans())
def test_split_groups_gives_each_groups_rows_in_order(codes: list[int], grouped: bool) -> None:
    """Each group's rows, in row order, groups in code order: whether the rows come group by
    group already (split in place) or interleaved (sorted first)."""
    from xlaprof.tables.categorical import split_groups

    group = np.unique(np.array(codes), return_inverse=True)[1].astype(np.int64)  # 0 .. n-1, used
    if grouped:
        group = np.sort(group)
    rows = np.arange(100, 100 + len(group))
    found = split_groups(rows, group, int(group.max()) + 1)
    expected = [rows[group == code].tolist() for code in range(int(group.max()) + 1)]
    assert [part.tolist() for part in found] == expected
