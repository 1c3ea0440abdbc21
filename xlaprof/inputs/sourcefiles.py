"""Which source files analysis may read, and reading them safely.

Findings quote the user's own source lines, named by ``source_file`` in a graph's HLO metadata
or by python frames in the debug log. Those names come from the run directory, which is data
someone may have sent: ``/etc/passwd`` there must not put that file's lines into a report, a
FIFO must not hang analysis, ``/dev/zero`` must not exhaust memory. So a source file is read
only when it resolves (symlinks followed) inside one of the *source roots* of the analysis in
progress, is a regular file, and is at most ``MAX_SOURCE_BYTES``.

The roots are ``--source-root`` when given, otherwise the run's recorded working directory when
it exists on this machine; report and log files have none unless given. They are set for the
duration of an analysis with ``source_roots(...)`` (a context variable, so threads and nested
analyses keep their own).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from pathlib import Path

from xlaprof.safeio import UnsafeFile, read_capped

MAX_SOURCE_BYTES = 4 * 1024**2

_ROOTS: contextvars.ContextVar[tuple[Path, ...]] = contextvars.ContextVar(
    "xlaprof_source_roots", default=()
)


def current_roots() -> tuple[Path, ...]:
    """The source roots of the analysis in progress (empty: no source is read)."""
    return _ROOTS.get()


@contextlib.contextmanager
def source_roots(*roots: str | os.PathLike[str] | None) -> Iterator[tuple[Path, ...]]:
    """Allow reading sources under ``roots`` (those that are folders here) within the block."""
    resolved = tuple(
        dict.fromkeys(Path(r).resolve() for r in roots if r is not None and Path(r).is_dir())
    )
    token = _ROOTS.set(resolved)
    try:
        yield resolved
    finally:
        _ROOTS.reset(token)


def allowed_path(file: str, roots: tuple[Path, ...]) -> Path | None:
    """``file`` resolved, if it lies inside one of ``roots``; relative names are tried in each."""
    if not file or "\x00" in file:
        return None
    candidates = [Path(file)] if os.path.isabs(file) else [root / file for root in roots]
    for candidate in candidates:
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError):
            continue
        if any(resolved == root or root in resolved.parents for root in roots):
            return resolved
    return None


def read_source(file: str, roots: tuple[Path, ...] | None = None) -> str | None:
    """The text of source ``file`` if it may be read (see the module docstring), else None."""
    roots = current_roots() if roots is None else roots
    path = allowed_path(file, roots)
    if path is None:
        return None
    try:
        return read_capped(path, MAX_SOURCE_BYTES).decode("utf-8", errors="replace")
    except (OSError, UnsafeFile):
        return None
