"""Value formats of metrics reports: durations, sizes, numbers (property-based)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xlaprof.parse.units import parse_leading_quantity, parse_quantity


def torch_xla_duration(seconds_us: int, padded: bool) -> str:
    """Format like torch_xla's metrics.cc (padded) or the un-padded variant seen in the wild."""
    days, rest = divmod(seconds_us, 86_400_000_000)
    hours, rest = divmod(rest, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    secs, rest = divmod(rest, 1_000_000)
    millis, micros = divmod(rest, 1000)
    parts = []
    for value, unit, width in ((days, "d", 1), (hours, "h", 2), (minutes, "m", 2), (secs, "s", 2)):
        if value or parts:
            parts.append(f"{value:0{width}d}{unit}" if padded else f"{value}{unit}")
    if millis or parts:
        parts.append(f"{millis:03d}ms" if padded else f"{millis}ms")
    parts.append(f"{micros:07.3f}us" if padded else f"{micros:.3f}us")
    return "".join(parts)


@given(st.integers(min_value=0, max_value=10 * 86_400_000_000), st.booleans())
def test_durations_round_trip(micros: int, padded: bool) -> None:
    text = torch_xla_duration(micros, padded)
    value, unit = parse_quantity(text)
    assert unit == "s"
    assert value == pytest.approx(micros / 1e6, rel=1e-9, abs=1e-9)


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
        ("02h42m54s123ms456.789us", 9774.123456789, "s"),
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
