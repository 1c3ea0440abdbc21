"""The user's source files as an analysis may read them: ``SourceFiles``, a field of
``AnalysisInput``.

Findings quote the user's own lines, named by ``source_file`` in a graph's HLO metadata or by
python frames in the debug log. Those names come from the input, which is data someone may
have sent: ``/etc/passwd`` there must not put that file's lines into a report, a FIFO must not
hang analysis, ``/dev/zero`` must not exhaust memory. So a file is read only when it resolves
(symlinks followed) inside one of the ``roots``, is a regular ``*.py`` file, and is at most
``MAX_SOURCE_BYTES``. The pipeline builds one ``SourceFiles`` per part from its request
(``xlaprof.inputs.sourcefiles`` says which folders count) and hands it to the analyzers in
their input: no analyzer reads a file by itself, and two analyses in one process (threads,
the MCP server) never share roots or what was read.

Each file is read once per part (its text, its lines and its syntax tree are kept), and the
files that exist here but were not read are collected (``withheld``): the report says so.
"""

from __future__ import annotations

import ast
import contextlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path, PurePath

from xlaprof.safeio import UnsafeFile, read_capped

log = logging.getLogger(__name__)

MAX_SOURCE_BYTES = 4 * 1024**2
SOURCE_SUFFIX = ".py"


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


class SourceFiles:
    """The ``*.py`` files under ``roots`` (folders that exist here), read when asked.

    ``recorded``: the folder the input was recorded in (a run's working directory), where it
    is not where its sources are here (a run recorded in another clone or on another machine,
    read with ``--source-root``): a file named under it that cannot be read where it is named
    is read at the same place under each root instead, inside the roots as ever.
    """

    def __init__(
        self,
        roots: Iterable[str | os.PathLike[str] | None] = (),
        recorded: str | None = None,
    ) -> None:
        self.roots: tuple[Path, ...] = tuple(
            dict.fromkeys(Path(r).resolve() for r in roots if r is not None and Path(r).is_dir())
        )
        self.recorded = (
            PurePath(recorded)
            if recorded and os.path.isabs(recorded) and "\x00" not in recorded
            else None
        )
        self._texts: dict[str, str | None] = {}
        self._trees: dict[str, ast.Module | None] = {}
        self._withheld: set[str] = set()

    def text(self, file: str) -> str | None:
        """The text of ``file`` if it may be read (see the module docstring), else None."""
        if file not in self._texts:
            self._texts[file] = self._read(file)
        return self._texts[file]

    def line(self, file: str, line: int) -> str | None:
        """One source line, stripped, if the file may be read."""
        text = self.text(file)
        if text is None:
            log.debug("source line %s:%s not readable here", file, line)
            return None
        lines = text.split("\n")
        return lines[line - 1].strip() if 0 < line <= len(lines) else None

    def tree(self, file: str) -> ast.Module | None:
        """The syntax tree of ``file``, if it may be read and parses."""
        if file not in self._trees:
            text = self.text(file)
            tree = None
            if text is not None:
                try:
                    tree = ast.parse(text, filename=file)
                except (SyntaxError, ValueError, RecursionError) as error:
                    log.debug("no syntax tree for %s: %s", file, error)
            self._trees[file] = tree
        return self._trees[file]

    def withheld(self) -> list[str]:
        """Files asked for that exist here but were not read (outside the roots, not ``*.py``)."""
        return sorted(self._withheld)

    def _read(self, file: str) -> str | None:
        path = allowed_path(file, self.roots) or self._moved(file)
        if path is not None and path.suffix != SOURCE_SUFFIX:
            path = None
        if path is None:
            self._note_withheld(file)
            return None
        try:
            return read_capped(path, MAX_SOURCE_BYTES).decode("utf-8", errors="replace")
        except (OSError, UnsafeFile):
            return None

    def _moved(self, file: str) -> Path | None:
        """``file``, named under the recorded folder, at its place under a root."""
        if self.recorded is None or not file or "\x00" in file or not os.path.isabs(file):
            return None
        try:
            inside = PurePath(file).relative_to(self.recorded)
        except ValueError:
            return None
        if ".." in inside.parts:
            return None
        for root in self.roots:
            path = allowed_path(str(root / inside), self.roots)
            if path is not None and path.is_file():
                return path
        return None

    def _note_withheld(self, file: str) -> None:
        if not file or "\x00" in file or not os.path.isabs(file):
            return
        with contextlib.suppress(OSError, ValueError):
            if Path(file).is_file():
                self._withheld.add(file)

    def __repr__(self) -> str:
        return f"SourceFiles(roots={[str(r) for r in self.roots]})"
