"""The run directory's JSON files read defensively: a JSON-lines file object by object, and a
row's fields kept only where their values fit the row's declared types. What does not fit is
reported, never raised."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

from xlaprof.parse.units import finite
from xlaprof.parse.units import loads as load_json
from xlaprof.safeio import UnsafeFile, iter_lines

log = logging.getLogger(__name__)


def read_jsonl(path: Path, warn: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file, streamed; what is not an object is skipped.

    A cut last line (a killed writer) is dropped silently; other unreadable lines, lines that
    are not objects (``[1,2,3]``), a folder or FIFO in the file's place are reported to ``warn``.
    """
    if not path.exists() and not path.is_symlink():
        return []
    rows: list[dict[str, Any]] = []
    skipped = 0
    last_error = ""
    try:
        for number, raw in enumerate(iter_lines(path), start=1):
            if not raw.strip():
                continue
            try:
                value = load_json(raw)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
                if raw.endswith(b"\n"):  # not a cut last line
                    skipped += 1
                    last_error = f"line {number}: {error}"
                log.debug("%s: line %d skipped (%s)", path, number, error)
                continue
            if isinstance(value, dict):
                rows.append(value)
            else:
                skipped += 1
                last_error = f"line {number}: a {type(value).__name__}, not an object"
    except (OSError, UnsafeFile) as error:
        if warn is not None:
            warn(f"{path.name}: not read ({reason(error)})")
        return rows
    if skipped and warn is not None:
        warn(f"{path.name}: {skipped} line(s) skipped ({last_error})")
    return rows


def reason(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return str(error)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63


def _is_float(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and finite(value)


# Per field type, as the format's row dataclasses declare it, whether a JSON value fits it.
_FITS: dict[str, Callable[[Any], bool]] = {
    "int": _is_int,
    "float": _is_float,
    "str": lambda value: isinstance(value, str),
    "bool": lambda value: isinstance(value, bool),
    "list[str]": lambda value: isinstance(value, list) and all(isinstance(v, str) for v in value),
    "list[int]": lambda value: isinstance(value, list) and all(_is_int(v) for v in value),
    "dict[str, str]": lambda value: (
        isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    ),
    "dict[str, int]": lambda value: (
        isinstance(value, dict) and all(_is_int(v) for v in value.values())
    ),
}


def fits(value: Any, spec: str) -> bool:
    """Whether a JSON value fits a field's declared type (as written in the dataclass); any
    value fits a type not in ``_FITS``."""
    if value is None:
        return spec.endswith(" | None")
    check = _FITS.get(spec.removesuffix(" | None"))
    return check is None or check(value)


def typed_fields(
    cls: type, data: dict[str, Any], warn: Callable[[str], None], what: str
) -> dict[str, Any]:
    """The known fields of ``data`` whose values fit ``cls``'s field types; warn on the rest.

    A field with a value of the wrong type (``"wall_s": "abc"``) is left out, so it takes the
    dataclass default (None where the value was not measured) rather than crashing later.
    """
    kept = {}
    for spec in fields(cls):
        if spec.name not in data:
            continue
        value = data[spec.name]
        if spec.type == "float" or spec.type == "float | None":
            value = float(value) if fits(value, "float") else value
        if fits(value, str(spec.type)):
            kept[spec.name] = value
        else:
            warn(f"{what}: {spec.name} = {short(value)} is not a {spec.type}; ignored")
    return kept


def short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
