"""Parsers on reports the real torch_xla CPU runtime produces during this test run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from xlaprof.analyzers import run_analyzers
from xlaprof.findings import Kind
from xlaprof.inputs.paths import load_text_inputs
from xlaprof.parse.debug_log import parse_debug_log
from xlaprof.parse.metrics_report import parse_metrics_report

pytestmark = pytest.mark.runtime


def _line(marker: str) -> int:
    return next(i for i, text in enumerate(SCRIPT.splitlines(), 1) if marker in text)


SCRIPT = """
import torch, torch_xla
import torch_xla.debug.metrics as met
device = torch_xla.device()
w = torch.randn(8, 4, device=device)
torch_xla.sync()  # materialize w so the loop's graphs differ only by batch size
for batch in (4, 4, 6, 4, 3):
    x = torch.randn(batch, 8, device=device)
    y = (x @ w).relu().sum()
    torch_xla.sync()  # LOOP SYNC
for _ in range(3):
    print(torch.median(x).item())  # MEDIAN
print(met.metrics_report())
print(met.short_metrics_report())
"""


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> tuple[str, str, Path]:
    workdir = tmp_path_factory.mktemp("runtime")
    script = workdir / "job.py"
    script.write_text(SCRIPT)
    tracker = workdir / "fallbacks.txt"
    env = {
        **os.environ,
        "PJRT_DEVICE": "CPU",
        "PT_XLA_DEBUG_LEVEL": "2",
        "XLA_FNTRACKER_FILE": str(tracker),
    }
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, result.stderr, tracker


def test_reports_parse_without_warnings(capture) -> None:
    stdout, _stderr, _tracker = capture
    result = parse_metrics_report(stdout)
    assert result.warnings == []
    full, short = result.reports  # metrics_report() then short_metrics_report()
    assert set(short.metrics) <= set(full.metrics)
    assert full.metrics["CompileTime"].total_samples == short.metrics["CompileTime"].total_samples
    assert full.counters["aten::median"] == 3
    assert full.counters["aten::_local_scalar_dense"] == 3


def test_debug_log_agrees_with_the_metrics(capture) -> None:
    stdout, stderr, _tracker = capture
    log = parse_debug_log(stderr)
    assert log.warnings == []
    full = parse_metrics_report(stdout).reports[0]
    assert len(log.compilations()) == full.metrics["CompileTime"].total_samples
    assert len(log.executions()) == full.metrics["ExecuteTime"].total_samples
    hashes = {e.graph_hash for e in log.compilations() if e.frames[-1].line == _line("LOOP SYNC")}
    assert len(hashes) == 3  # batch sizes 4, 6 and 3


def test_fallbacks_are_located_at_the_users_line(capture, tmp_path: Path) -> None:
    stdout, stderr, tracker = capture
    log_file = tmp_path / "job.log"
    log_file.write_text(stdout + stderr)
    data, _ = load_text_inputs([log_file, tracker])
    findings = run_analyzers(data)
    fallback = next(f for f in findings if f.kind == Kind.ATEN_FALLBACK)
    assert fallback.evidence["op"] == "aten::median"
    assert fallback.location.line == _line("MEDIAN")
    recompile = next(f for f in findings if f.kind == Kind.RECOMPILATION)
    assert recompile.location.line == _line("LOOP SYNC")
    host = next(f for f in findings if f.kind == Kind.HOST_SYNC)
    assert host.location.line == _line("MEDIAN") and host.evidence["reads_at_site"] == 3
