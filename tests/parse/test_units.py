"""Value formats of metrics reports: durations, sizes, numbers (property-based)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xlaprof.parse.units import parse_leading_quantity, parse_quantity

# torch_xla's MetricFnTime, field by field: days to milliseconds as whole numbers (rounded,
# zero-padded to 2 or 3 digits), microseconds with 3 decimals; a field is printed once the
# remaining time holds one of its unit, and only its floor is taken off what remains.
_FIELDS = (("d", 86400e9, 2, 0), ("h", 3600e9, 2, 0), ("m", 60e9, 2, 0), ("s", 1e9, 2, 0))
_FIELDS += (("ms", 1e6, 3, 0), ("us", 1e3, 7, 3))


def torch_xla_duration(nanos: float, padded: bool) -> str:
    """Format like torch_xla's metrics.cc (padded) or the un-padded variant seen in the wild."""
    parts: list[str] = []
    for index, (unit, scale, width, decimals) in enumerate(_FIELDS):
        amount = nanos / scale
        if amount >= 1 or parts or index == len(_FIELDS) - 1:
            shown = f"{amount:0{width}.{decimals}f}" if padded else f"{amount:.{decimals}f}"
            parts.append(shown + unit)
            nanos -= math.floor(amount) * scale
    return "".join(parts)


@given(st.integers(min_value=0, max_value=10 * 86_400 * 10**9), st.booleans())
def test_durations_round_trip(nanos: int, padded: bool) -> None:
    # A quarter nanosecond more keeps every field off an exact half (printf rounds those to
    # even, which no reader can undo); the printed microseconds hold the rest to 0.5 ns.
    text = torch_xla_duration(nanos + 0.25, padded)
    value, unit = parse_quantity(text)
    assert unit == "s"
    assert value == pytest.approx((nanos + 0.25) / 1e9, rel=1e-12, abs=1e-9)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        # the runtime's metric_data beside its printed report (issue 47), and a public report
        ("04s998ms000.000us", 3.998),
        ("03m37s000ms000.000us", 157.0),
        ("07m60s991ms000.000us", 6 * 60 + 59.991),
    ],
)
def test_rounded_top_fields(text: str, seconds: float) -> None:
    assert parse_quantity(text) == (pytest.approx(seconds), "s")


@given(
    st.floats(min_value=0, max_value=1e6, allow_nan=False),
    st.sampled_from(["B", "KB", "MB", "GB", "TB"]),
)
def test_sizes_are_1024_based(number: float, unit: str) -> None:
    text = f"{number:.2f}{unit}"
    value, parsed_unit = parse_quantity(text)
    factor = 1024 ** ["B", "KB", "MB", "GB", "TB"].index(unit)
    assert parsed_unit == "B"
    assert value == pytest.approx(float(f"{number:.2f}") * factor)


@given(st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_plain_numbers(number: float) -> None:
    value, unit = parse_quantity(repr(number))
    assert unit == ""
    assert value == pytest.approx(number)


@pytest.mark.parametrize(
    ("text", "expected", "unit"),
    [
        ("000.070us", 70e-9, "s"),
        ("02h42m54s123ms456.789us", 6114.123456789, "s"),
        ("049ms677.126us", 0.048677126, "s"),
        ("18s450ms18.269us", 18.450018269, "s"),
        ("1d02h", 93600.0, "s"),
        ("44.00B", 44.0, "B"),
        ("1.50GB", 1.5 * 1024**3, "B"),
        ("11887.1", 11887.1, ""),
    ],
)
def test_known_values(text: str, expected: float, unit: str) -> None:
    value, parsed_unit = parse_quantity(text)
    assert parsed_unit == unit
    assert value == pytest.approx(expected)


def test_nan_is_a_number() -> None:
    value, unit = parse_quantity("nan")
    assert math.isnan(value) and unit == ""


@given(st.text(max_size=40))
def test_garbage_gives_a_typed_value_or_value_error(text: str) -> None:
    try:
        value, unit = parse_quantity(text)
    except ValueError as error:
        assert str(error)
    else:
        assert isinstance(value, float) and unit in ("s", "B", "")


def test_leading_value_with_glued_text() -> None:
    assert parse_leading_quantity("016ms137.123us / second") == pytest.approx(
        (0.016137123, "s", "/ second")
    )
