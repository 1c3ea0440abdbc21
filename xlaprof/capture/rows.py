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
# The most bytes one per-step file (steps/regions/samples rows, the debug and fallback logs) may
# hold: a run of a million steps must not fill the disk, nor write logs `xlaprof analyze`
# refuses (--max-size, 256 MB by default). What is past the cap is dropped and counted in
# run.json's ``dropped`` (docs/run-directory.md). ``$XLAPROF_MAX_FILE_SIZE`` (bytes) sets it.
MAX_FILE_BYTES = 128 * 1024**2
MAX_FILE_ENV = "XLAPROF_MAX_FILE_SIZE"


def file_limit() -> int:
    """The cap on each per-step file of a run (``$XLAPROF_MAX_FILE_SIZE``, else 128 MB)."""
    value = os.environ.get(MAX_FILE_ENV, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else MAX_FILE_BYTES


class RowBuffer:
    """JSON lines for one file of the run directory, written in batches."""

    def __init__(self, path: Path, limit: int | None = None) -> None:
        self.path = path
        self.handle = path.open("a")
        self.rows: list[dict[str, Any]] = []
        self.limit = limit
        self.written = 0
        self.dropped = 0  # rows not written: the file had reached ``limit``

    def add(self, row: dict[str, Any]) -> None:
        """Keep ``row`` for the next flush (it must not change afterwards)."""
        self.rows.append(row)

    def flush(self) -> None:
        """Append the kept rows to the file, in one write."""
        if not self.rows or self.handle.closed:
            return
        rows, self.rows = self.rows, []
        lines = [json.dumps(row) + "\n" for row in rows]  # ASCII: characters are bytes
        if self.limit is not None:
            room = self.limit - self.written
            kept = 0
            while kept < len(lines) and len(lines[kept]) <= room:
                room -= len(lines[kept])
                kept += 1
            self.dropped += len(lines) - kept
            lines = lines[:kept]
            self.written = self.limit - room
        if lines:
            self.handle.write("".join(lines))
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

    def __init__(self, path: Path | None, limit: int | None = None) -> None:
        self.path = path
        self.fd: int | None = None
        if path is not None:
            self.fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        self.limit = limit
        self.last = 0  # the size at the last step boundary under the cap
        self.dropped = 0  # bytes cut off past the cap

    @property
    def tracking(self) -> bool:
        """Whether this log is open (the session turned it on)."""
        return self.fd is not None

    def size(self) -> int:
        # lseek to the end answers the size as an int; fstat would build a 20-field result.
        if self.fd is None:
            return 0
        size = os.lseek(self.fd, 0, os.SEEK_END)
        if self.limit is not None:
            if size <= self.limit:
                self.last = size
            else:
                size = self._cut(size)
        return size

    def _cut(self, size: int) -> int:
        """Past its cap the log is cut back to its size at the last step boundary under the
        cap (a line end): later steps' text is dropped, counted in ``dropped``. torch_xla
        appends (``O_APPEND``), so its next lines start at the cut, never past a hole."""
        assert self.path is not None
        os.truncate(self.path, self.last)
        self.dropped += size - self.last
        return self.last

    def close(self) -> None:
        if self.fd is not None:
            self.size()  # text after the last boundary obeys the cap too
            os.close(self.fd)
            self.fd = None
