"""Per-step rows kept in memory and appended to their JSON-lines file about once a second, and
the sizes of the logs torch_xla appends to, read without a path lookup.

A step boundary runs between two training steps, on the training thread. Writing its rows
there would put a ``write`` system call (which also lets go of the GIL) into every step;
instead the rows wait in a list and go to disk together when ``run.json`` is rewritten (at most
once a second), when profiling stops and when the run finishes. A process killed outright
(SIGKILL) loses at most the last second of rows, and what is on disk stays consistent:
``run.json`` is written after the rows it counts, and ``xlaprof run`` recounts the rows of a
killed process from the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

# How often rows reach the disk (and run.json is rewritten) while a job runs.
FLUSH_SECONDS = 1.0


class RowBuffer:
    """JSON lines for one file of the run directory, written in batches."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handle = path.open("a")
        self.rows: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any]) -> None:
        """Keep ``row`` for the next flush (it must not change afterwards)."""
        self.rows.append(row)

    def flush(self) -> None:
        """Append the kept rows to the file, in one write."""
        if not self.rows or self.handle.closed:
            return
        rows, self.rows = self.rows, []
        self.handle.write("".join(json.dumps(row) + "\n" for row in rows))
        self.handle.flush()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.handle.close()

    def discard(self) -> None:
        """Forget the kept rows (a forked child holds a copy of its parent's)."""
        self.rows = []


class LogSize:
    """The size of a log another writer appends to (torch_xla's debug and fallback logs).

    Each step records how far the logs had grown. ``os.stat`` of the path walks the directory
    tree every time (tens of microseconds on some file systems); once the file exists it is
    opened for reading and ``fstat`` of the open file answers instead. ``None``: no log.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.fd: int | None = None

    def size(self) -> int:
        if self.fd is None:
            if self.path is None:
                return 0
            try:
                self.fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return 0  # not written yet
        return os.fstat(self.fd).st_size

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
