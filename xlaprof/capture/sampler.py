"""The host CPU sampler: where the training loop's main thread spends CPU, by user line."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import defaultdict

from xlaprof.parse.frames import is_library_file

log = logging.getLogger(__name__)

DEFAULT_SAMPLE_HZ = 100.0


class HostSampler:
    """Where the main thread burns CPU, by the user's source line, ~``hz`` times a second.

    Each tick reads the main thread's CPU clock and charges the CPU time used since the last
    tick to the innermost frame of the user's own code (or ``LIBRARY`` when no user frame is on
    the stack). Time the thread spends blocked (waiting for the device in a sync or ``.item()``)
    uses no CPU, so it is charged nothing: the result says where host work goes, not where the
    host waits.

    Each tick costs the main thread about a microsecond of GIL time (the stack walk stops at
    the first user frame; library files are classified once). An error in a tick stops the
    sampler, never the job: it is kept in ``error`` for the run's warnings.
    """

    LIBRARY = "<library>"

    def __init__(self, hz: float) -> None:
        self.interval = 1.0 / hz
        self.thread_id = threading.main_thread().ident
        try:
            self.clock: int | None = time.pthread_getcpuclockid(self.thread_id or 0)
        except (AttributeError, OSError) as error:
            log.debug("no per-thread CPU clock (%s): charging wall time", error)
            self.clock = None  # no per-thread CPU clock here: charge wall intervals instead
        self.lock = threading.Lock()
        self.seconds: dict[str, float] = defaultdict(float)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="xlaprof-sampler", daemon=True)
        self.cache: dict[str, bool] = {}
        self.error: str | None = None

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()

    def take(self) -> dict[str, float]:
        with self.lock:
            seconds, self.seconds = dict(self.seconds), defaultdict(float)
        return {where: round(value, 6) for where, value in seconds.items() if value > 0}

    def _is_library(self, filename: str) -> bool:
        known = self.cache.get(filename)
        if known is None:
            known = self.cache[filename] = is_library_file(filename)
        return known

    def _now(self) -> float:
        return time.clock_gettime(self.clock) if self.clock is not None else time.perf_counter()

    def _loop(self) -> None:
        try:
            self._sample()
        except Exception as error:  # a profiler thread must not take the job down
            self.error = f"{type(error).__name__}: {error}"

    def _sample(self) -> None:
        last = self._now()
        while not self.stop_event.wait(self.interval):
            now = self._now()
            used, last = now - last, now
            frame = sys._current_frames().get(self.thread_id)
            where = self.LIBRARY
            while frame is not None:
                code = frame.f_code
                if not self._is_library(code.co_filename):
                    where = f"{code.co_filename}:{frame.f_lineno}"
                    break
                frame = frame.f_back
            del frame
            with self.lock:
                self.seconds[where] += used
