"""The stepping thread's run-queue wait (``capture.runqueue``): what Linux says a thread
waited for a CPU, read per thread.

The truth is made, not timed: this process and a busy child are pinned to one and the same
core, so while both want to run the scheduler must make one wait; a thread that burns CPU for
a while in that state has waited on the run queue for part of it. Without a competitor on its
core, the same work waits far less.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from xlaprof.capture.runqueue import RunQueueClock

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/thread-self/schedstat"), reason="Linux scheduler statistics"
)


def _burn(seconds: float) -> None:
    """Use ``seconds`` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_thread_sharing_its_core_with_a_busy_process_waits_for_it() -> None:
    # GIVEN this process and a process that never sleeps, both on one core
    core = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    busy = subprocess.Popen(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"]
    )
    try:
        os.sched_setaffinity(0, {core})
        time.sleep(0.2)  # the competitor is running
        clock = RunQueueClock()
        start = clock.read()
        # WHEN this thread uses 0.2 s of CPU
        _burn(0.2)
        waited = clock.read()
    finally:
        busy.kill()
        busy.wait()
        os.sched_setaffinity(0, before)
    # THEN the clock says it waited for the core (two runnable tasks on one core share it)
    assert start is not None and waited is not None
    assert waited - start > 0.02


def test_the_clock_follows_the_thread_that_reads_it() -> None:
    # GIVEN one clock read on this thread, then on another thread that has just started
    clock = RunQueueClock()
    mine = clock.read()
    theirs: list[float | None] = []
    worker = threading.Thread(target=lambda: theirs.append(clock.read()))
    worker.start()
    worker.join()
    # THEN the other thread's read is measured too (the file is reopened for it), and
    # reading back on this thread gives a value no smaller than before (its own again)
    assert mine is not None and theirs[0] is not None
    again = clock.read()
    assert again is not None and again >= mine
    clock.close()


def test_where_linux_does_not_say_the_wait_is_not_measured(tmp_path: Path) -> None:
    # GIVEN a clock whose file is not there (another system, no scheduler statistics)
    clock = RunQueueClock(str(tmp_path / "absent"))
    # THEN it reads None, every time, and never raises
    assert clock.read() is None
    assert clock.read() is None
