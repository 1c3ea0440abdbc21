"""The host CPU sampler: where the training loop's main thread spends CPU, by user line."""

from __future__ import annotations

import logging
import random
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable

from xlaprof.parse.frames import is_library_file
from xlaprof.rundir.schema import SAMPLE_LIBRARY

log = logging.getLogger(__name__)

# Each tick takes the GIL from the training thread, which holds it while it traces ops: the
# hand-over and back cost that thread ~130 us a tick on the 2-core VM this was measured on
# (overhead_loop.py --toggle sampler: 1.3% of a tracing-bound loop at 100 Hz, ~0.27% at 20).
# 20 ticks a second still give a line profile of a few thousand samples over a job of minutes.
DEFAULT_SAMPLE_HZ = 20.0
# Each wait is drawn from [1 - JITTER, 1 + JITTER] x the mean interval, so a step whose length
# is a multiple of the interval is not always caught at the same line.
JITTER = 0.5


class HostSampler:
    """Where the main thread burns CPU, by the user's source line, ~``hz`` times a second
    (jittered).

    Each tick reads the main thread's CPU clock and charges the CPU time used since the last
    tick to the innermost frame of the user's own code (or ``LIBRARY`` when no user frame is on
    the stack). Time the thread spends blocked (waiting for the device in a sync or ``.item()``)
    uses no CPU, so it is charged nothing: the result says where host work goes, not where the
    host waits.

    Each tick also charges the step in progress (``step()``, read by the tick itself), so the
    training thread hands nothing over at its step boundaries: ``take`` collects finished steps
    about once a second. A tick costs the main thread the GIL for the stack walk, which stops at
    the first user frame (library files are classified once); ``benchmarks/overhead.py``
    measures what that costs a step. An error in a tick stops the sampler, never the job: it is
    kept in ``error`` for the run's warnings.
    """

    LIBRARY = SAMPLE_LIBRARY

    def __init__(self, hz: float, step: Callable[[], int] = lambda: 0) -> None:
        self.interval = 1.0 / hz
        # A generator of its own: drawing from the random module's would move the job's own
        # random sequence.
        self.random = random.Random()
        self.step = step
        self.thread_id = threading.main_thread().ident or 0  # None only before it starts
        try:
            self.clock: int | None = time.pthread_getcpuclockid(self.thread_id)
        except (AttributeError, OSError) as error:
            log.debug("no per-thread CPU clock (%s): charging wall time", error)
            self.clock = None  # no per-thread CPU clock here: charge wall intervals instead
        self.lock = threading.Lock()
        self.seconds: dict[tuple[int, str], float] = defaultdict(float)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="xlaprof-sampler", daemon=True)
        self.cache: dict[str, bool] = {}
        self.error: str | None = None

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()

    def take(self, keep: int | None = None) -> dict[int, dict[str, float]]:
        """CPU seconds by step and user line since the last take, except step ``keep`` (the
        step in progress: its ticks stay for a later take)."""
        with self.lock:
            taken = self.seconds
            self.seconds = defaultdict(float)
            if keep is not None:
                for key in [k for k in taken if k[0] == keep]:
                    self.seconds[key] = taken.pop(key)
        by_step: dict[int, dict[str, float]] = {}
        for (step, where), value in taken.items():
            if value > 0:
                by_step.setdefault(step, {})[where] = round(value, 6)
        return by_step

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
        spread = self.interval * JITTER
        while not self.stop_event.wait(self.interval + self.random.uniform(-spread, spread)):
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
            step = self.step()
            with self.lock:
                self.seconds[step, where] += used
