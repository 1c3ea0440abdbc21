"""Fixtures the whole suite shares, and its settings.

Tests import what they share from ``helpers`` (paths, the CLI in a subprocess, long runs). A
fixture whose input is missing fails every test that needs it, naming what was expected where;
none skips.
"""

from __future__ import annotations

from pathlib import Path

import hypothesis
import pytest
from helpers import DATA, SAMPLE_RUNS, SAMPLES, missing_input, sample_run

# A property holds or not whatever the machine's speed: no per-example deadline (hypothesis'
# default of 200 ms fails an example on a busy machine, not on a wrong answer).
hypothesis.settings.register_profile("xlaprof", deadline=None)
hypothesis.settings.load_profile("xlaprof")

# sample_traces/<name>.log: a job's log of examples/<name>.py (sample_traces/README.md)
SAMPLE_LOGS = ("healthy_loop", "recompile_varying_batch", "host_sync_item", "cpu_fallback")


@pytest.fixture(scope="session")
def samples() -> Path:
    """``sample_traces/``: the examples' job logs and run directories, which the repository
    holds."""
    for name in SAMPLE_LOGS:
        if not (SAMPLES / f"{name}.log").is_file():
            missing_input(SAMPLES / f"{name}.log", "a sample job log (make samples writes it)")
    for name in SAMPLE_RUNS:
        sample_run(name)
    return SAMPLES


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``tests/data``: hand-built inputs in the shapes real logs take (README there)."""
    return DATA
