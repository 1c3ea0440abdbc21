"""The benchmarks' stand-ins for xlaprof's own objects keep up with them: ``overhead.py``'s
sync-hook cost runs the real hook on a stand-in session, which once lacked what the hook came
to ask of a session (the run-queue clock, the step index) and failed every overhead run. No
time is asserted: only that the measurement runs and gives a number."""

from __future__ import annotations

import math
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def test_the_sync_hooks_cost_is_measured_on_its_stand_in_session() -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import overhead_loop
    finally:
        sys.path.remove(str(BENCHMARKS))
    seconds = overhead_loop._hook_cost(count=2_000)
    assert math.isfinite(seconds)
