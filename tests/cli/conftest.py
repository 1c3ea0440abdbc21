"""Runs of the examples under ``xlaprof run``, made once a session for the CLI's tests."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import EXAMPLES, cli, made_once, session_folder, stop_long_runs

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
    folder above their own temporary ones. Each example has its own lock, and the second
    worker walks the list from its end, so two workers that need the runs at once record
    them side by side (half the time each) instead of one waiting for the other."""
    root = session_folder(tmp_path_factory, "example_runs")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    second = bool(worker) and int(worker.removeprefix("gw") or 0) % 2 == 1
    order = EXAMPLE_RUNS[::-1] if second else EXAMPLE_RUNS
    for name in order:
        with made_once(root, name) as todo:
            if not todo:
                continue
            shutil.rmtree(root / name, ignore_errors=True)  # a worker's earlier try that failed
            script = str(EXAMPLES / f"{name}.py")
            result = cli("run", "--out", str(root / name), "--", sys.executable, script)
            assert result.returncode == 0, result.stderr[-3000:]
            assert "final" in result.stdout  # the script's own output passes through
    return {name: root / name for name in EXAMPLE_RUNS}


@pytest.fixture(autouse=True)
def _no_long_run_outlives_its_test() -> Iterator[None]:
    yield
    stop_long_runs()
