"""Which source files analysis may read, and reading them safely.

Findings quote the user's own source lines, named by ``source_file`` in a graph's HLO metadata
or by python frames in the debug log. Those names come from the run directory, which is data
someone may have sent: ``/etc/passwd`` there must not put that file's lines into a report, a
FIFO must not hang analysis, ``/dev/zero`` must not exhaust memory. So a source file is read
only when it resolves (symlinks followed) inside one of the *source roots* of the analysis in
progress, is a regular file, and is at most ``MAX_SOURCE_BYTES``.

The roots are ``--source-root`` when given, otherwise the run's recorded working directory when
it is a real project folder on this machine (``recorded_root``: never ``/``, a system folder such
as ``/etc`` or ``/usr``, the home folder or one above it, nor a folder anyone may write to);
report and log files have none unless given. Only Python files (``*.py``) are read: source lines
in HLO metadata and Python frames name nothing else. The roots are set for the duration of an
analysis with ``source_roots(...)`` (a context variable, so threads and nested analyses keep
their own), which also collects the files that exist here but were not read (``withheld``): the
report says so, and how to allow them (``withheld_note``).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from xlaprof.safeio import UnsafeFile, read_capped

MAX_SOURCE_BYTES = 4 * 1024**2

_ROOTS: contextvars.ContextVar[tuple[Path, ...]] = contextvars.ContextVar(
    "xlaprof_source_roots", default=()
)
_WITHHELD: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar(
    "xlaprof_withheld_sources", default=None
)
# Caches of what was read under given roots (analysis/source.py): emptied for each analysis, so
# that each one sees, and records, its own refusals.
_CACHES: list[Callable[[], None]] = []
# Folders of the system, never a project: a run recording one of them (or one inside them) as
# its working directory gets no source lines unless --source-root names a folder.
SYSTEM_FOLDERS = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run",
    "/sbin", "/snap", "/srv", "/sys", "/usr", "/var", "/private", "/System", "/Library",
)  # fmt: skip
SOURCE_SUFFIX = ".py"


def on_new_roots(clear: Callable[[], None]) -> None:
    """Register a cache of source reads, emptied whenever an analysis sets its roots."""
    _CACHES.append(clear)


def recorded_root(cwd: str | None) -> Path | None:
    """A run's recorded working directory, if it is a real project folder on this machine.

    ``cwd`` comes from ``run.json``, which may have come from anyone: ``"/"`` or ``"/etc"``
    would let HLO metadata naming ``/etc/passwd`` put that file into a report. So it counts
    only if it resolves to an existing folder that is not ``/``, not a system folder nor
    inside one, not the home folder nor one above it, and not writable by everyone.
    """
    if not cwd or "\x00" in cwd or not os.path.isabs(cwd):
        return None
    try:
        path = Path(cwd).resolve()
        info = path.stat()
    except (OSError, RuntimeError):
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_mode & stat.S_IWOTH:
        return None
    if path == Path(path.anchor) or any(
        path == Path(system) or Path(system) in path.parents for system in SYSTEM_FOLDERS
    ):
        return None
    home = Path.home().resolve()
    if path == home or path in home.parents:
        return None
    return path


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
    withheld = _WITHHELD.set(set())
    for clear in _CACHES:
        clear()
    try:
        yield resolved
    finally:
        _ROOTS.reset(token)
        _WITHHELD.reset(withheld)


def withheld() -> list[str]:
    """Source files of the analysis in progress that exist here but were not read."""
    return sorted(_WITHHELD.get() or ())


def withheld_note(files: list[str], roots: tuple[Path, ...]) -> str | None:
    """The line a report shows when source lines were withheld, saying how to allow them."""
    if not files:
        return None
    shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    where = f"outside the source root {', '.join(map(str, roots))}" if roots else "no source root"
    return (
        f"source lines of {len(files)} file(s) not shown ({where}; only *{SOURCE_SUFFIX} files "
        f"inside it are read): {shown}; pass --source-root DIR to allow a folder you trust"
    )


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
    if path is not None and path.suffix != SOURCE_SUFFIX:
        path = None
    if path is None:
        _record_withheld(file)
        return None
    try:
        return read_capped(path, MAX_SOURCE_BYTES).decode("utf-8", errors="replace")
    except (OSError, UnsafeFile):
        return None


def _record_withheld(file: str) -> None:
    """Note ``file`` as withheld if it is a file that exists here (else nothing was kept back)."""
    found = _WITHHELD.get()
    if found is None or not file or "\x00" in file or not os.path.isabs(file):
        return
    with contextlib.suppress(OSError, ValueError):
        if Path(file).is_file():
            found.add(file)
