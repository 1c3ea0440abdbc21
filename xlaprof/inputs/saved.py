"""A saved result: a document written by ``xlaprof analyze --json``, as an input every command
reads (``analyze``, ``report``, ``diff``, ``check``, ``mcp``, ``bench``, ``xlaprof.Analysis``).

``is_saved`` sniffs a file by its head (the schema's name in its first 4 KB), so a Chrome
trace (``*.trace.json``) is not read twice; ``load_saved`` reads it within the size cap,
through the document's one schema (``xlaprof.model.document``: anything it refuses is one
line and exit code 29), and returns the finished result it holds. Each part of that result
names the file read (``PartResult.read_from``), and its first note says that the result was
read, not measured, so every output can say so.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from xlaprof.model.document_id import SCHEMA

if TYPE_CHECKING:
    from xlaprof.model.result import AnalysisResult

_HEAD_BYTES = 4096


def is_saved(path: Path) -> bool:
    """Whether ``path`` is a regular ``*.json`` file whose head names the document's schema."""
    from xlaprof.safeio import UnsafeFile, open_regular

    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    try:
        fd = open_regular(path)
        with os.fdopen(fd, "rb") as handle:
            head = handle.read(_HEAD_BYTES).decode("utf-8", errors="replace")
    except (OSError, UnsafeFile):
        return False
    return f'"schema": "{SCHEMA}"' in head or f'"schema":"{SCHEMA}"' in head


def load_saved(path: Path, max_size: int, process: str | None = None) -> AnalysisResult:
    """The result the document at ``path`` holds: every part (``process`` None or ``*``), or
    the one named ``process``."""
    from xlaprof.errors import InputNotFound, InputTooLarge, InputUnreadable
    from xlaprof.model.document import parse_document
    from xlaprof.model.request import ALL_PROCESSES
    from xlaprof.model.result import AnalysisResult
    from xlaprof.safeio import UnsafeFile, read_capped

    try:
        raw = read_capped(path, max_size)
    except UnsafeFile as error:
        raise InputTooLarge(f"{error}; pass --max-size to read it anyway") from None
    except OSError as error:
        raise InputUnreadable(f"{path}: cannot be read ({error.strerror})") from None
    document = parse_document(raw, str(path))
    result = _with_steady(_with_parts(_with_summaries(AnalysisResult.from_json(document))))
    for part in result.parts:
        part.read_from = str(path)
    if process not in (None, ALL_PROCESSES):
        chosen = [p for p in result.parts if p.part.name == process]
        if not chosen:
            names = ", ".join(p.part.name for p in result.parts)
            raise InputNotFound(f"{path}: no process {process!r} in this saved result ({names})")
        result.parts = chosen
    note = result.saved_note()
    result.notes = [*([note] if note else []), *result.notes]
    return result


def _with_parts(result: AnalysisResult) -> AnalysisResult:
    """A saved result whose timeline predates the step model's part columns: them added, as
    the pipeline makes them (the step chart stacks them; a renderer computes nothing)."""
    from xlaprof.tables.story import PART_COLUMNS, with_bounds

    for part in result.parts:
        timeline = part.timeline
        if timeline is not None and not timeline.empty and PART_COLUMNS[0] not in timeline:
            bounded = with_bounds(timeline, 0)  # as the step chart drew such a document
            part.timeline = timeline.assign(**{c: bounded[c] for c in PART_COLUMNS})
    return result


def _with_summaries(result: AnalysisResult) -> AnalysisResult:
    """A saved result whose document predates ``summaries``: the figures of each table it kept
    whole, from its rows (those of a cut table came with ``rows_kept``), as the pipeline makes
    them, so that the renderers only show them."""
    from xlaprof.tables.bounded import skew_summary, straggler_summary

    for part in result.parts:
        for name, table, summarize in (
            ("stragglers", part.stragglers, straggler_summary),
            ("host_skew", part.host_skew, skew_summary),
        ):
            if name not in part.summaries and name not in part.rows_kept:
                figures = summarize(table)
                if figures is not None:
                    part.summaries[name] = figures
    return result


def _with_steady(result: AnalysisResult) -> AnalysisResult:
    """A saved result whose document predates ``view.steady`` (version 3 or older): the steady
    step of the timeline rows it kept, as the pipeline makes it of every row (a timeline the
    document cut to its bound gives the steady step of the rows kept)."""
    from xlaprof.tables.timeline import steady_step

    for part in result.parts:
        if part.steady is None:
            part.steady = steady_step(part.timeline, part.part.warmup_steps)
    return result
