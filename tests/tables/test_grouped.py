"""Grouped reductions over arrays (``xlaprof.tables.grouped``) give what pandas' groupby gives.

The expected values are pandas' own (``groupby(...).median()``, ``idxmax``, ``idxmin``,
``nunique``) on the same rows: ties, NaN, zeros of either sign, groups of one row, groups of as
many rows each (a pod where every host has every step) and of different sizes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from xlaprof.tables.grouped import Groups, ranks, text_codes


def _rows(seed: int, rows: int, even: bool) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    if even:  # every (step, device) on each of four hosts, in host order
        steps = np.tile(np.repeat(np.arange(rows // 8), 2), 4)
        devices = np.tile(np.tile([0, 1], rows // 8), 4)
        hosts = np.repeat(np.arange(4), len(steps) // 4)
    else:
        steps = rng.integers(-3, 9, rows)
        devices = rng.integers(0, 3, rows)
        hosts = rng.integers(0, 5, rows)
    values = rng.choice([0.0, -0.0, 1.0, 2.5, 2.5, 7.0, np.nan, 1e-9], len(steps))
    return pd.DataFrame({"step": steps, "device": devices, "host": hosts, "value": values})


@pytest.mark.parametrize("even", [True, False], ids=["every-host-every-step", "ragged"])
@pytest.mark.parametrize("seed", range(12))
def test_grouped_reductions_are_pandas_groupby(seed: int, even: bool) -> None:
    # GIVEN rows keyed by (step, device), values with ties and NaN
    frame = _rows(seed, 240, even)
    # WHEN they are grouped on arrays
    groups = Groups([frame["step"].to_numpy(), frame["device"].to_numpy()])
    grouped = frame.groupby(["step", "device"], sort=True)
    # THEN the groups are pandas' groups, in its order
    keys = grouped.size().index
    assert np.array_equal(groups.keys[0], keys.get_level_values(0))
    assert np.array_equal(groups.keys[1], keys.get_level_values(1))
    assert np.array_equal(groups.sizes(), grouped.size().to_numpy())
    # AND each reduction is pandas' (bit for bit)
    assert np.array_equal(groups.distinct(frame["host"].to_numpy()), grouped["host"].nunique())
    want = grouped["value"].median().to_numpy()
    np.testing.assert_array_equal(groups.median(frame["value"].to_numpy()), want, strict=True)
    valued = grouped["value"].count().to_numpy() > 0  # pandas raises on a group of NaNs
    some = frame[frame.groupby(["step", "device"])["value"].transform("count") > 0]
    among = some.groupby(["step", "device"], sort=True)["value"]
    got_max = groups.first_max(frame["value"].to_numpy())[valued]
    got_min = groups.first_min(frame["value"].to_numpy())[valued]
    assert np.array_equal(got_max, among.idxmax().to_numpy())
    assert np.array_equal(got_min, among.idxmin().to_numpy())


def test_text_codes_ranked_as_a_grouping_sorts_texts() -> None:
    # GIVEN a text column with a missing value
    column = pd.Series(["b", "a", None, "b", "TPU:10", "TPU:2"], dtype=object)
    # WHEN it is coded, and its texts ranked
    codes, names = text_codes(column)
    rank, ordered = ranks(names)
    # THEN the codes index the texts, a missing text has none (-1), and the ranks sort them
    known = column.notna().to_numpy()
    assert list(names[codes[known]]) == list(column[known])
    assert list(codes[~known]) == [-1]
    assert list(ordered) == sorted(column[known].unique())
    assert list(ordered[rank[codes[known]]]) == list(column[known])
