"""Device time by the user's source line (``xlaprof.tables.device.lines``): from a capture's
embedded HLO protos and from a run's graphs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import cli, sample_run


def test_jax_cpu_device_time_reaches_the_users_lines(jax_cpu_trace: Any) -> None:
    from xlaprof.tables.device.lines import line_coverage

    lines = jax_cpu_trace.device_time_by_line()
    assert line_coverage(jax_cpu_trace.summary().lines) > 0.99
    top = lines.iloc[0]
    # x = jnp.tanh(x @ w): the forward and backward matmuls of every layer
    assert top["file"].endswith("capture_jax_cpu.py") and top["line"] == 61


def test_run_directory_device_time_by_line_in_json_and_notebook() -> None:
    import xlaprof

    analysis = xlaprof.Analysis(sample_run("healthy_loop"), warn=False)
    lines = analysis.device_time_by_line()
    named = lines[lines["file"].notna()]
    assert {Path(f).name for f in named["file"]} >= {"healthy_loop.py", "_common.py"}
    done = cli("analyze", "--json", str(sample_run("healthy_loop")))
    trace = json.loads(done.stdout)["trace"]
    assert trace["device_time_by_line_coverage"] > 0.4
    assert trace["device_time_by_line"][0]["device_s"] > 0
