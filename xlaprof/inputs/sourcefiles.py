"""Which of the user's source files an analysis may read: the source roots of a request.

Findings quote the user's own source lines (``xlaprof.model.sources.SourceFiles`` reads them,
safely: inside the roots only, regular ``*.py`` files under a size cap). Which folders are
roots is decided here: ``--source-root`` when given, otherwise the run's recorded working
directory when it is a real project folder on this machine (``recorded_root``: never ``/``, a
system folder such as ``/etc`` or ``/usr``, the home folder or one above it, nor a folder
anyone may write to); report and log files have none unless given. The pipeline builds one
``SourceFiles`` per part and hands it to the analyzers in their input; the files that exist
here but were not read are said in the report with how to allow them (``withheld_note``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from xlaprof.model.sources import MAX_SOURCE_BYTES, SOURCE_SUFFIX, SourceFiles, allowed_path

__all__ = [
    "MAX_SOURCE_BYTES",
    "SOURCE_SUFFIX",
    "SYSTEM_FOLDERS",
    "SourceFiles",
    "allowed_path",
    "read_source",
    "recorded_root",
    "withheld_note",
]

# Folders of the system, never a project: a run recording one of them (or one inside them) as
# its working directory gets no source lines unless --source-root names a folder.
SYSTEM_FOLDERS = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run",
    "/sbin", "/snap", "/srv", "/sys", "/usr", "/var", "/private", "/System", "/Library",
)  # fmt: skip


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


def read_source(file: str, roots: tuple[Path, ...]) -> str | None:
    """The text of source ``file`` if it may be read under ``roots``, else None."""
    return SourceFiles(roots).text(file)
