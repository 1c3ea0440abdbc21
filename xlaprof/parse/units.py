"""Value formats torch_xla prints in metrics reports, converted to base units.

torch_xla prints durations as ``02h42m54s123ms456.789us`` (zero-padded fields, though some
builds drop the padding: ``18s450ms18.269us``), sizes as ``1.50GB`` (1024-based, as in
torch_xla's ``metrics.cc``), and plain numbers (including ``nan``). Everything is returned in
seconds, bytes, or as a plain float, with the unit ("s", "B" or "").
"""

from __future__ import annotations

import math
import re
from typing import Literal

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
_DURATION_PART = r"(\d+(?:\.\d+)?)(ms|us|ns|d|h|m|s)"
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


def parse_quantity(text: str) -> tuple[float, Unit]:
    """Parse one value as torch_xla prints it; raise ValueError if it is not one.

    >>> parse_quantity("01s250ms")
    (1.25, 's')
    >>> parse_quantity("2.00KB")
    (2048.0, 'B')
    """
    token = text.strip()
    if not token:
        raise ValueError("empty value")
    if _DURATION_RE.fullmatch(token):
        total = 0.0
        for number, unit in _DURATION_PART_RE.findall(token):
            total += float(number) * _DURATION_FACTORS[unit]
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


def format_seconds(seconds: float | None) -> str:
    """Short human form of a duration for terminal tables (``1.25 s``, ``830 us``)."""
    if seconds is None or math.isnan(seconds):
        return "-"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def format_bytes(size: float | None) -> str:
    """Short human form of a byte count, 1024-based like torch_xla."""
    if size is None or math.isnan(size):
        return "-"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(size) < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} TB"


def parse_size(text: str) -> int:
    """``--max-size`` values: ``512MB``, ``2GB``, or a byte count."""
    value, unit = parse_quantity(text.strip().upper().replace("IB", "B"))
    if unit not in ("B", "") or value <= 0:
        raise ValueError(f"not a size: {text!r}")
    return int(value)
