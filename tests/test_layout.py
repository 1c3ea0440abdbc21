"""The package's shape: the training process loads only the capture side, and the public
function ``xlaprof.analyze`` is never shadowed by a submodule."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import REPO, SAMPLES, cli

# What a profiled job must never load: analysis, renderers and their heavy libraries.
FORBIDDEN_PREFIXES = (
    "xlaprof.model",
    "xlaprof.tables",
    "xlaprof.inputs",
    "xlaprof.analyzers",
    "xlaprof.budgets",
    "xlaprof.pipeline",
    "xlaprof.report",
    "xlaprof.api",
    "pandas",
    "plotly",
)


def _forbidden(modules: list[str]) -> list[str]:
    return [m for m in modules if m.startswith(FORBIDDEN_PREFIXES)]


@pytest.mark.runtime
def test_a_profiled_job_loads_no_analysis(tmp_path: Path) -> None:
    # GIVEN a script that records sys.modules twice: after its steps, and after xlaprof's own
    # end-of-run work (its atexit handler is registered first, so it runs last).
    script = tmp_path / "job.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import atexit, json, sys

            def dump(name):
                with open({str(tmp_path)!r} + "/" + name, "w") as f:
                    json.dump(sorted(sys.modules), f)

            atexit.register(dump, "at_exit.json")
            import torch, torch_xla

            device = torch_xla.device()
            w = torch.randn(8, 8, device=device)
            for _ in range(3):
                w = (w @ w).tanh()
                torch_xla.sync()
            print(float(w.sum()))
            dump("after_steps.json")
            """
        )
    )
    # WHEN it runs under `xlaprof run` (graphs and debug analysis on, the default)
    result = cli("run", "-q", "--out", str(tmp_path / "runs"), "--", sys.executable, str(script))
    assert result.returncode == 0, result.stderr
    # THEN the session ran (3 steps recorded) and neither snapshot holds analysis modules
    run_json = next((tmp_path / "runs").glob("*/run.json"))
    assert json.loads(run_json.read_text())["steps_recorded"] == 3
    for name in ("after_steps.json", "at_exit.json"):
        modules = json.loads((tmp_path / name).read_text())
        assert "xlaprof.capture.session" in modules  # the check sees the profiled process
        assert _forbidden(modules) == [], name


def test_analyze_is_a_function_after_loading_a_run() -> None:
    # GIVEN a fresh interpreter that first loads a run (which imports analysis modules)
    code = textwrap.dedent(
        f"""
        import xlaprof
        run = xlaprof.load_run({str(SAMPLES / "runs" / "healthy_loop")!r})
        run.steps()
        from xlaprof.analyzers import run_analyzers  # a submodule import, as users do
        findings = xlaprof.analyze({str(SAMPLES / "runs" / "host_sync_item")!r})
        print(sorted({{f.kind.value for f in findings}}))
        """
    )
    # WHEN it calls xlaprof.analyze THEN it is still the function
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert "host_sync" in result.stdout
