"""Runs of the examples under ``xlaprof run``, made once a session for the CLI's tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
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
    """Each example run once under ``xlaprof run`` (the script's own output passes through)."""
    root = tmp_path_factory.mktemp("runs")
    runs = {}
    for name in EXAMPLE_RUNS:
        out = root / name
        result = cli("run", "--out", str(out), "--", sys.executable, str(EXAMPLES / f"{name}.py"))
        assert result.returncode == 0, result.stderr[-3000:]
        assert "final" in result.stdout  # the script's own output passes through
        runs[name] = out
    return runs


@pytest.fixture(autouse=True)
def _no_long_run_outlives_its_test() -> Iterator[None]:
    yield
    stop_long_runs()
