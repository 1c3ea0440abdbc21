"""Value formats torch_xla prints in metrics reports, converted to base units.

torch_xla prints durations as ``02h42m54s123ms456.789us`` (zero-padded fields, though some
builds drop the padding: ``18s450ms18.269us``), sizes as ``1.50GB`` (1024-based, as in
torch_xla's ``metrics.cc``), and plain numbers (including ``nan``). Everything is returned in
seconds, bytes, or as a plain float, with the unit ("s", "B" or "").
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any, Literal

Unit = Literal["s", "B", ""]

_DURATION_FACTORS = {
    "d": 86400.0,
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "ns": 1e-9,
}
# "ms", "us" and "ns" must be tried before "m" and "s".
# A part starts where no number goes on before it: a search would otherwise start again at
# each digit of a long number (quadratic).
_DURATION_PART = r"(?<![\d.])(\d+(?:\.\d+)?)(ms|us|ns|d|h|m|s)"
# A sign is allowed so that "-10s" reads as minus ten seconds, not as -10 with the unit cut off.
_DURATION_RE = re.compile(rf"[-+]?(?:{_DURATION_PART})+")
_DURATION_PART_RE = re.compile(_DURATION_PART)

_SIZE_FACTORS = {
    "B": 1.0,
    "KB": 1024.0,
    "MB": 1024.0**2,
    "GB": 1024.0**3,
    "TB": 1024.0**4,
    "PB": 1024.0**5,
}
_SIZE_RE = re.compile(r"([-+]?\d+(?:\.\d+)?)\s?(B|KB|MB|GB|TB|PB)")
_NUMBER_RE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)", re.I)


def _duration_seconds(parts: list[tuple[str, str]]) -> float:
    """Seconds of a duration's ``(number, unit)`` fields, read as torch_xla's formatter meant them.

    torch_xla's ``MetricFnTime`` prints each field but the last as the remaining time in that
    unit rounded to a whole number, then carries only the floor down: 3.998 s prints as
    ``04s998ms…``, 157 s as ``03m37s…``, and 6 min 59.991 s as ``07m60s991ms…``. A field is
    therefore one more than its floor whenever what the fields below it add up to is half of
    its unit or more. That layout is recognised by its last field, microseconds with a
    fraction, which is the only one printed exactly; reading from it upwards gives each field
    its floor back. Any other layout (``1d02h``, a value someone typed) is read at face value.
    """
    values = [(float(number), _DURATION_FACTORS[unit]) for number, unit in parts]
    if len(parts) < 2 or parts[-1][1] != "us" or "." not in parts[-1][0]:
        return sum(number * factor for number, factor in values)
    below = values[-1][0] * values[-1][1]
    for number, factor in reversed(values[:-1]):
        # The printed field rounds (floor + fraction), where the fraction is what lies below.
        whole = number - 1 if number >= 1 and below / factor >= 0.5 else number
        below += whole * factor
    return below


def parse_quantity(text: str) -> tuple[float, Unit]:
    """Parse one value as torch_xla prints it; raise ValueError if it is not one.

    >>> parse_quantity("01s250ms")
    (1.25, 's')
    >>> parse_quantity("04s998ms000.000us")  # torch_xla rounds all but the last field
    (3.998, 's')
    >>> parse_quantity("2.00KB")
    (2048.0, 'B')
    """
    token = text.strip()
    if not token:
        raise ValueError("empty value")
    if _DURATION_RE.fullmatch(token):
        total = _duration_seconds(_DURATION_PART_RE.findall(token))
        return (-total if token.startswith("-") else total), "s"
    size = _SIZE_RE.fullmatch(token)
    if size:
        return float(size.group(1)) * _SIZE_FACTORS[size.group(2)], "B"
    if _NUMBER_RE.fullmatch(token):
        value = float(token)
        if math.isinf(value) and "inf" not in token.lower():
            # "1e999": a number, but not one a float holds; not an infinity either.
            raise ValueError(f"number out of range: {token[:40]!r}")
        return value, ""
    raise ValueError(f"not a duration, size or number: {token!r}")


def parse_leading_quantity(text: str) -> tuple[float, Unit, str]:
    """Parse the value at the start of ``text``; return it with the unparsed rest.

    Real logs glue program output onto report lines (``Value: 12Epoch 3 ...``), so the value
    is the longest prefix that parses, and the rest is handed back for the caller to judge.
    """
    stripped = text.strip()
    first = stripped.split(" ", 1)[0] if stripped else ""
    candidates = [first]
    for regex in (_DURATION_RE, _SIZE_RE, _NUMBER_RE):
        match = regex.match(stripped)
        if match:
            candidates.append(match.group(0))
    for candidate in sorted(set(candidates), key=len, reverse=True):
        if not candidate:
            continue
        try:
            value, unit = parse_quantity(candidate)
        except ValueError:
            continue
        return value, unit, stripped[len(candidate) :].strip()
    raise ValueError(f"no value at the start of {stripped[:40]!r}")


# How every output shows a value that was not measured (None, NaN, <NA>): never as 0.
NOT_MEASURED = "—"


def missing(value: object) -> bool:
    """True for a value that was not measured: None, NaN, or pandas' <NA>."""
    return value is None or (isinstance(value, float) and value != value) or str(value) == "<NA>"


# The most digits an integer of any float's range has (float max is about 1.8e308).
_MAX_FLOAT_DIGITS = 309


def finite(value: object) -> bool:
    """True for an int or float that is a finite float, without raising.

    ``math.isfinite`` and ``float`` raise ``OverflowError`` on an integer past any float
    (``10**400``, which a JSON or TOML file may hold): that was an exit 70.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return abs(value) <= sys.float_info.max
    return math.isfinite(value)


def json_int(text: str) -> int:
    """A JSON integer literal as ``int``, refused past any float's range.

    The hook every JSON reader of sent data parses integers with (``loads``, ``DECODER``): an
    integer such as ``1e400`` written out in digits would reach ``float()`` or
    ``math.isfinite`` downstream and raise ``OverflowError``; past 4300 digits ``int()`` itself
    raises a ``ValueError`` that is no ``JSONDecodeError``. Refused here, it is a damaged
    value like any other malformed JSON, where the reader already says so in one line.
    """
    digits = len(text) - (text[:1] == "-")
    if digits > _MAX_FLOAT_DIGITS or (
        digits == _MAX_FLOAT_DIGITS and abs(int(text)) > sys.float_info.max
    ):
        raise json.JSONDecodeError(
            f"an integer of {digits} digits, past any float's range", text[:40], 0
        )
    return int(text)


# The decoder of sent JSON: integers past any float are refused (``json_int``).
DECODER = json.JSONDecoder(parse_int=json_int)


def loads(data: str | bytes | bytearray) -> Any:
    """``json.loads`` for sent data: integers past any float's range raise
    ``json.JSONDecodeError`` (``json_int``), as other malformed JSON does."""
    return json.loads(data, parse_int=json_int)


def as_float(value: object) -> float:
    """``float(value)`` for a value typed ``object``: a table's cell of whatever dtype (a
    Python or numpy number, a numeric string), as the formatters take it once ``missing`` has
    ruled out the values not measured. Anything else raises as ``float()`` does."""
    # float() decides at run time what it accepts (__float__, __index__, str, bytes): an object
    # cannot be narrowed to that union statically.
    return float(value)  # type: ignore[arg-type]


def format_utc(seconds: float) -> str:
    """A moment given in seconds since the epoch as ``2026-12-02 06:21:05 UTC``; never raises.

    A recorded start comes from a file someone sent: finite but absurd (``1e300``, year
    minus a million), it is past what ``datetime`` can show (``OverflowError``, ``OSError``,
    ``ValueError``), and so is NaN. Such a moment is shown as the number it was recorded as.
    """
    from datetime import UTC, datetime

    if not finite(seconds):
        return f"not a time (recorded as {repr(seconds)[:24]})"
    try:
        moment = datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return f"not a time (recorded as {seconds:.6g} s since the epoch)"
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def format_seconds(seconds: object) -> str:
    """A duration in a unit that suits it: ``1.2 h``, ``3.5 min``, ``92.56 s``, ``12.34 ms``,
    ``850.0 µs``; "—" when not measured."""
    if missing(seconds):
        return NOT_MEASURED
    value = as_float(seconds)
    size = abs(value)
    if size >= 3600:
        return f"{value / 3600:.1f} h"
    if size >= 60:
        return f"{value / 60:.1f} min"
    if size >= 1:
        return f"{value:.2f} s"
    if size >= 1e-3:
        return f"{value * 1e3:.2f} ms"
    return f"{value * 1e6:.1f} µs"


def format_bytes(size: object) -> str:
    """A byte count, 1024-based like torch_xla (``512 B``, ``1.50 GB``); "—" when not measured."""
    if missing(size):
        return NOT_MEASURED
    value = as_float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(value) < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} TB"


def format_rate(value: object, unit: str) -> str:
    """A rate with an SI prefix: ``164.6 GFLOP/s``, ``1.2 TB/s``; "—" when not measured."""
    if missing(value):
        return NOT_MEASURED
    number = as_float(value)
    if number == 0:
        return "0"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(number) >= scale:
            return f"{number / scale:.1f} {prefix}{unit}/s"
    return f"{number:.1f} {unit}/s"


def format_percent(value: object) -> str:
    """A share as a percentage (``86.5%``); "—" when not measured."""
    return NOT_MEASURED if missing(value) else f"{as_float(value):.1%}"


def parse_size(text: str) -> int:
    """``--max-size`` values: ``512MB``, ``2GB``, or a byte count."""
    value, unit = parse_quantity(text.strip().upper().replace("IB", "B"))
    if unit not in ("B", "") or value <= 0:
        raise ValueError(f"not a size: {text!r}")
    return int(value)
