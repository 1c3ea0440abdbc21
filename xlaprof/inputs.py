"""Turning command-line paths into an ``AnalysisInput``: checks, detection and parsing.

Every way a path can be wrong maps to one ``XlaprofError`` subclass (and so one exit code):
missing, unreadable, a directory that is not a run, empty, binary, too large, or text that holds
neither a metrics report nor PT_XLA_DEBUG output. A file may hold both kinds (a job's stderr with
the debug analysis and a final metrics report): both parsers read every file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from xlaprof.analyze.data import AnalysisInput
from xlaprof.errors import (
    InputEmpty,
    InputNotFound,
    InputNotRecognized,
    InputNotText,
    InputTooLarge,
    InputUnreadable,
    RunDirError,
)
from xlaprof.parse.debug_log import DebugLog, parse_debug_log
from xlaprof.parse.metrics_report import ParseWarning, parse_metrics_report
from xlaprof.parse.units import format_bytes

DEFAULT_MAX_INPUT_BYTES = 256 * 1024**2
_SNIFF_BYTES = 8192
# Share of undecodable bytes in the first block above which a file is taken as binary.
_BINARY_REPLACEMENT_SHARE = 0.05


@dataclass
class SourceInfo:
    """What was found in one input path (reported with ``--json`` under ``sources``)."""

    path: str
    kinds: list[str]
    reports: int = 0
    debug_events: int = 0
    warnings: list[ParseWarning] = field(default_factory=list)


def read_text(path: Path, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> str:
    """Read a text input, raising the error that says what is wrong with it."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise InputNotFound(f"{path}: no such file or directory") from None
    except OSError as error:
        raise InputUnreadable(f"{path}: cannot be read ({error.strerror})") from None
    if path.is_dir():
        raise RunDirError(
            f"{path}: is a directory, not a run directory (no run.json) or a report file"
        )
    if stat.st_size > max_bytes:
        raise InputTooLarge(
            f"{path}: {format_bytes(stat.st_size)} is over the {format_bytes(max_bytes)} limit; "
            f"pass --max-size {_size_hint(stat.st_size)} to read it anyway"
        )
    try:
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except PermissionError:
        raise InputUnreadable(f"{path}: permission denied") from None
    except OSError as error:
        raise InputUnreadable(f"{path}: cannot be read ({error.strerror})") from None
    if not data.strip():
        raise InputEmpty(f"{path}: the file is empty")
    head = data[:_SNIFF_BYTES]
    if b"\x00" in head or _replacement_share(head) > _BINARY_REPLACEMENT_SHARE:
        raise InputNotText(f"{path}: binary data, not a metrics report or PT_XLA_DEBUG log")
    return data.decode("utf-8", errors="replace")


def _replacement_share(block: bytes) -> float:
    text = block.decode("utf-8", errors="replace")
    # A multi-byte character cut at the block's end is not evidence of binary data.
    return text[:-4].count("\ufffd") / max(len(text), 1)


def _size_hint(size: int) -> str:
    gib = size / 1024**3
    return f"{int(gib) + 1}GB" if gib >= 1 else f"{int(size / 1024**2) + 1}MB"


def parse_size(text: str) -> int:
    """``--max-size`` values: ``512MB``, ``2GB``, or a byte count."""
    from xlaprof.parse.units import parse_quantity

    value, unit = parse_quantity(text.strip().upper().replace("IB", "B"))
    if unit not in ("B", "") or value <= 0:
        raise ValueError(f"not a size: {text!r}")
    return int(value)


def load_text_inputs(
    paths: list[Path], max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> tuple[AnalysisInput, list[SourceInfo]]:
    """Parse report/log files into one ``AnalysisInput`` (taken as one job's output)."""
    data = AnalysisInput()
    sources = []
    for path in paths:
        text = read_text(path, max_bytes)
        metrics = parse_metrics_report(text)
        debug = parse_debug_log(text)
        kinds = []
        if metrics.reports:
            kinds.append("metrics_report")
        if not debug.empty:
            kinds.append("debug_log")
        if not kinds:
            raise InputNotRecognized(
                f"{path}: no metrics report or PT_XLA_DEBUG output found "
                "(expected 'Metric:'/'Counter:' blocks or 'Compilation Analysis:' lines)"
            )
        data.reports.extend(metrics.reports)
        merge_debug(data.debug, debug)
        sources.append(
            SourceInfo(
                path=os.fspath(path),
                kinds=kinds,
                reports=len(metrics.reports),
                debug_events=len(debug.events),
                warnings=metrics.warnings + debug.warnings,
            )
        )
    return data, sources


def merge_debug(into: DebugLog, other: DebugLog) -> None:
    into.events.extend(other.events)
    into.too_frequent.extend(other.too_frequent)
    into.fallbacks.extend(other.fallbacks)
    into.warnings.extend(other.warnings)
