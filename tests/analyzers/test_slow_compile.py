"""Slow compilation (``xlaprof.analyzers.slow_compile``): judged on durations, so on fixed
inputs here (a TPU-sized report), never on a run this machine timed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import REPO, cli, findings_for

from xlaprof import api
from xlaprof.analyzers import slow_compile
from xlaprof.findings import Kind, Severity
from xlaprof.model.input import AnalysisInput
from xlaprof.rundir.schema import StepRow


def test_slow_compile_on_tpu_sized_report(data_dir) -> None:
    (finding,) = findings_for(data_dir / "tpu_slow_compile.txt")
    assert finding.kind == Kind.SLOW_COMPILE
    # CompileTime's "02h42m54s123ms456.789us" is 1 h 41 min 54.12 s: torch_xla rounds every
    # field but the last (see parse.units)
    assert finding.evidence["mean_compile_seconds"] == pytest.approx(6114.123456789 / 4)
    assert "initialize_cache" in finding.suggestion


def _steps(compile_s: list[float], execute_s: float) -> list[StepRow]:
    """Step rows: one compile of each given length, and ``execute_s`` of execution a step."""
    return [
        StepRow(step=i, wall_s=c + execute_s, compiles=1, compile_s=c, execute_s=execute_s)
        for i, c in enumerate(compile_s)
    ]


@pytest.mark.parametrize(
    ("compile_s", "execute_s", "expected"),
    [
        # a CPU test run: 2 compiles of 4 s against 1 s of execution: short in all, no verdict
        ([4.0, 4.0], 0.5, None),
        # compiles of 30 s on average: each is long
        ([29.0, 31.0], 100.0, Severity.WARNING),
        # 300 s of compile in all, whatever its share
        ([25.0] * 12, 1000.0, Severity.WARNING),
        # 12 s of compile, half of compile + execute time: a note
        ([6.0, 6.0], 6.0, Severity.INFO),
        # 12 s of compile but a quarter of the time: no verdict
        ([6.0, 6.0], 18.0, None),
    ],
)
def test_slow_compile_verdicts_on_fixed_steps(
    compile_s: list[float], execute_s: float, expected: Severity | None
) -> None:
    # GIVEN step rows whose compile and execute seconds are written here (never timed on this
    # machine) WHEN they are analyzed THEN the verdict follows the thresholds
    findings = slow_compile.analyze(AnalysisInput(steps=_steps(compile_s, execute_s)))
    assert [f.severity for f in findings] == ([] if expected is None else [expected])
    for finding in findings:
        assert finding.evidence["compiles"] == len(compile_s)
        assert finding.evidence["compile_seconds"] == pytest.approx(sum(compile_s))


def test_a_pasted_report_gets_no_bench_command_naming_a_file(data_dir: Path) -> None:
    # GIVEN a pasted metrics report (no script: issue 29 got `bench cache train.py:FACTORY`)
    result = cli("analyze", str(data_dir / "tpu_slow_compile.txt"), "--json")
    assert result.returncode == 0, result.stderr
    (finding,) = [f for f in json.loads(result.stdout)["findings"] if f["kind"] == "slow_compile"]
    # THEN the finding says how to make a bench target, and names no file
    text = finding["evidence"]["bench_command"]
    assert "train.py" not in text and "FACTORY" not in text
    assert text.startswith("write a function in a file of yours")


def test_a_cpu_run_is_not_sent_to_measure_a_cache_that_cannot_load(samples) -> None:
    # GIVEN a recorded run on the CPU backend (run.json's device_kind) that compiled long
    run = samples / "realcode_runs" / "text_cls_growing_buckets"
    info = json.loads(next(run.glob("*/run.json")).read_text())
    assert info["device_kind"] == "CPU"
    (finding,) = [f for f in api.analyze(run, source_root=REPO) if f.kind is Kind.SLOW_COMPILE]
    # THEN no `xlaprof bench cache` is offered, and what can be measured here comes first
    assert "bench_command" not in finding.evidence
    assert str(finding.evidence["cache_measurable_here"]).startswith("no:")
    assert finding.suggestion.startswith("Remove recompilations first")
