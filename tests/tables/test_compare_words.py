"""A before/after figure in words (``xlaprof.tables.compare.describe_change``), for every pair a
run can give: a figure that fell to zero once made ``xlaprof bench cache`` exit 70 (its words
divided by the ratio)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from xlaprof.tables.compare import describe_change

_figure = st.one_of(st.none(), st.just(0.0), st.floats(0, 1e6, allow_nan=False))


def test_a_figure_that_fell_to_zero_is_said_so() -> None:
    assert describe_change(0.004, 0.0) == (0.0, "down to zero")


def test_ratios_beyond_a_float_are_said_in_words() -> None:
    # after/before underflows to 0 (the case hypothesis found) or overflows to infinity
    assert describe_change(2.0, 5e-324) == (0.0, "down to about zero")
    assert describe_change(5e-324, 2.0) == (None, "was about zero")


@given(_figure, _figure)
def test_any_pair_of_figures_has_words(before: float | None, after: float | None) -> None:
    ratio, words = describe_change(before, after)
    assert words
    assert ratio is None or math.isfinite(ratio)
