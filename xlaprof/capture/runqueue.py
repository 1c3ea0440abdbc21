"""The stepping thread's time waiting for a CPU: how long it was runnable but not running.

On a busy machine a step's host wall time holds time its thread spent ready to run while other
processes had the cores. That time is neither the step's host work (its CPU clock) nor a wait
for the device; without measuring it, it is left over in the step's time. Linux counts it per
thread (``/proc/thread-self/schedstat``: time on a CPU, time waiting on a run queue, timeslices,
in nanoseconds), so each step boundary reads it, as it reads the thread's CPU clock.

Linux adds to a thread's wait when the thread is given a CPU again, so a wait is counted at
the moment it ends: one that began before a step's boundary and ended after it is in the later
step (the session caps a step's wait at its wall time).

The file is opened once per thread (``/proc/thread-self`` names the thread that opens it) and
read with ``pread`` (about a microsecond); where it cannot be read (another system, a kernel
without scheduler statistics) the clock is None and the step's wait is not measured.
"""

from __future__ import annotations

import contextlib
import os
import threading


class RunQueueClock:
    """Seconds the calling thread has waited on a run queue, or None where not measured."""

    def __init__(self, path: str = "/proc/thread-self/schedstat") -> None:
        self._path = path
        self._thread: int | None = None
        self._fd: int | None = None
        self._broken = False
        self._start: float | None = None  # the reading ``restart`` took

    def read(self) -> float | None:
        """The thread's run-queue wait so far (seconds); None where Linux does not say."""
        if self._broken:
            return None
        thread = threading.get_native_id()
        try:
            if self._fd is None or thread != self._thread:
                self.close()
                self._fd, self._thread = os.open(self._path, os.O_RDONLY), thread
            fields = os.pread(self._fd, 128, 0).split()
            return int(fields[1]) / 1e9
        except (OSError, IndexError, ValueError):
            self.close()
            self._broken = True
            return None

    def restart(self) -> None:
        """Take the reading a step's wait is counted from (the step's start)."""
        self._start = self.read()

    def since_start(self, now: float | None) -> float | None:
        """The wait from the last ``restart`` to the reading ``now`` (None where either was
        not measured)."""
        if now is None or self._start is None:
            return None
        return max(now - self._start, 0.0)

    def close(self) -> None:
        """Close the file (a new thread, or the end of the session)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
