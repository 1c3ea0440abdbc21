"""The xplane frame's columns of one value (``frame.Constants``): the frame shares one read-only
array between such columns (every missing stat column, a capture's one host), so a value set in
one column must reach that column alone, and a frame's columns must read as their own."""

from __future__ import annotations

import numpy as np
import pandas as pd
from helpers import sample_capture

import xlaprof
from xlaprof.parse.xplane import xspace_frame
from xlaprof.tables.device.events import rows_of

_MISSING = ["flops", "bytes_accessed", "device_offset_ps", "device_duration_ps"]


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


def test_a_read_only_frame_views_one_value_for_each_stat_missing_throughout() -> None:
    """``read_only=True`` (the analysis's own load, which writes into no column): the same
    frame, each float stat missing on every event one read-only NaN that every row views (no
    memory a row), kept so by the device model's row gather; the default frame's are arrays
    of their own, for a caller to write into (the test above)."""
    path = sample_capture("healthy_loop")
    plain, lean = xspace_frame(path), xspace_frame(path, read_only=True)
    pd.testing.assert_frame_equal(lean, plain)
    for key in _MISSING:
        assert lean[key].to_numpy().strides == (0,)
        assert plain[key].to_numpy().strides == (8,)
    rows = np.arange(0, len(lean), 3)
    taken = rows_of(lean, rows)
    pd.testing.assert_frame_equal(taken, rows_of(plain, rows))
    assert all(taken[key].to_numpy().strides == (0,) for key in _MISSING)


def test_steps_are_int32_where_every_step_fits() -> None:
    """A trace's step numbers: ``Int32`` (4 bytes an event less than ``Int64``) with the
    numbers ``Int64`` held, missing where an event is in no step."""
    wide = xlaprof.load_trace(sample_capture("healthy_loop")).events["step"]
    assert str(wide.dtype) == "Int32"
    assert wide.notna().any() and wide.isna().any()
    assert wide.dropna().astype("Int64").min() >= 0
