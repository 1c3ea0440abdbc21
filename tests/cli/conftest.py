"""Runs of the examples under ``xlaprof run``, made once a session for the CLI's tests."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock
from helpers import EXAMPLES, cli, stop_long_runs

# The examples run under `xlaprof run` (each one's expected diagnosis: cli/test_run.py).
EXAMPLE_RUNS = (
    "healthy_loop",
    "recompile_varying_batch",
    "host_sync_item",
    "cpu_fallback",
    "tracing_bound_tiny_ops",
    "device_bound_matmul",
    "unrolled_layers",
    "scanned_layers",
    "data_dependent_shape",
)


@pytest.fixture(scope="session")
def example_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each example run once under ``xlaprof run`` (the script's own output passes through).

    Once for the whole session, not once per worker: under pytest-xdist the workers share the
    folder above their own temporary ones, and the first to get the lock records the runs
    (about a minute of the suite's time) while the other waits for them."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / "example_runs"
    with FileLock(str(shared / "example_runs.lock")):
        if not (root / "recorded").exists():
            shutil.rmtree(root, ignore_errors=True)  # a worker's earlier try that failed
            for name in EXAMPLE_RUNS:
                script = str(EXAMPLES / f"{name}.py")
                result = cli("run", "--out", str(root / name), "--", sys.executable, script)
                assert result.returncode == 0, result.stderr[-3000:]
                assert "final" in result.stdout  # the script's own output passes through
            (root / "recorded").touch()
    return {name: root / name for name in EXAMPLE_RUNS}


@pytest.fixture(autouse=True)
def _no_long_run_outlives_its_test() -> Iterator[None]:
    yield
    stop_long_runs()
