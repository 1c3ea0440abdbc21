"""The xplane frame's columns of one value (``frame.Constants``): the frame shares one read-only
array between such columns (every missing stat column, a capture's one host), so a value set in
one column must reach that column alone, and a frame's columns must read as their own."""

from __future__ import annotations

import numpy as np
from helpers import sample_capture

from xlaprof.parse.xplane import xspace_frame


def test_a_value_set_in_a_shared_column_stays_in_that_column() -> None:
    # GIVEN a real CPU capture's frame, whose device stats no event carries: four float
    # columns of NaN and group_id missing throughout
    frame = xspace_frame(sample_capture("healthy_loop"))
    missing = ["flops", "bytes_accessed", "device_offset_ps", "device_duration_ps"]
    assert all(frame[key].isna().all() for key in [*missing, "group_id", "hlo_category"])
    # WHEN a caller sets values in one of them, and a category in another text column
    frame.loc[frame.index[:3], "flops"] = 7.0
    frame.loc[frame.index[5], "group_id"] = 3
    frame["hlo_category"] = frame["hlo_category"].cat.add_categories(["x"])
    frame.loc[frame.index[0], "hlo_category"] = "x"
    # THEN only those cells changed: the other columns of the same value are still missing
    assert frame["flops"].iloc[:3].tolist() == [7.0] * 3
    assert frame["flops"].iloc[3:].isna().all()
    assert all(frame[key].isna().all() for key in missing[1:])
    assert frame["group_id"].notna().sum() == 1
    assert frame["hlo_category"].notna().sum() == 1
    # and a fresh frame of the same capture is as it was
    again = xspace_frame(sample_capture("healthy_loop"))
    assert all(again[key].isna().all() for key in [*missing, "group_id", "hlo_category"])


def test_the_constant_columns_hold_what_a_column_of_their_own_would() -> None:
    """The one host's column (a single code), the missing columns: values and dtypes as the
    column of every row's own value would be."""
    frame = xspace_frame(sample_capture("healthy_loop"))
    host = frame["host"]
    assert host.dtype == "category" and len(host.cat.categories) == 1
    assert (host.cat.codes.to_numpy() == 0).all()
    assert frame["flops"].dtype == np.float64
    assert str(frame["group_id"].dtype) == "Int64"
    assert frame["hlo_category"].cat.codes.dtype == np.int8
