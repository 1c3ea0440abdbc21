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

    Each step records how far the logs had grown. The log is created empty and opened when the
    session turns it on (torch_xla appends to an existing file: checked on 2.9, same inode), so
    a step asks ``fstat`` of the open file, never the path: a path lookup costs tens of
    microseconds on some file systems, and a missing file (no CPU fallback yet) would be looked
    up again at every step. ``None``: a log this session did not turn on; its size is 0.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.fd: int | None = None
        if path is not None:
            self.fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)

    @property
    def tracking(self) -> bool:
        """Whether this log is open (the session turned it on)."""
        return self.fd is not None

    def size(self) -> int:
        # lseek to the end answers the size as an int; fstat would build a 20-field result.
        return 0 if self.fd is None else os.lseek(self.fd, 0, os.SEEK_END)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
