"""The tracing-bound verdict (``xlaprof.analyzers.tracing_bound``) on fixed step rows: its
margins (host >= 1.5x device and device idle >= 30% of the step) and where it is placed. No
timing of this machine decides a verdict here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import paced_steps
from helpers import step_model_capture, step_model_run

from xlaprof.analyzers import tracing_bound
from xlaprof.api import analyze
from xlaprof.findings import Location, Severity
from xlaprof.inputs.traces import load_trace
from xlaprof.model.input import AnalysisInput
from xlaprof.model.sources import SourceFiles
from xlaprof.rundir.schema import StepRow


def steps(host: float, device: float, wall: float, count: int = 8) -> list[StepRow]:
    return paced_steps(host, device, wall, count)[0]


def paced(host: float, device: float, wall: float, **extra) -> AnalysisInput:
    """The analyzer's input for a loop paced as ``paced_steps`` makes it: its rows and the
    executions the run recorded (each step's device work, never queued)."""
    rows, runs = paced_steps(host, device, wall)
    return AnalysisInput(steps=rows, execution_rows=runs, **extra)


@pytest.mark.parametrize(
    ("host", "device", "wall", "expected"),
    [
        # the healthy torch_xla.compile loop: host 1.04x device: no verdict
        (1.04e-3, 1.0e-3, 1.5e-3, None),
        # host 2x device but the device is busy 80% of the step: no verdict
        (2.0e-3, 1.0e-3, 1.25e-3, None),
        # host 2x device, device idle 50%: a warning
        (2.0e-3, 1.0e-3, 2.0e-3, Severity.WARNING),
        # host 1.6x device, device idle 37.5%: a note
        (1.6e-3, 1.0e-3, 1.6e-3, Severity.INFO),
    ],
)
def test_tracing_bound_margins(host, device, wall, expected) -> None:
    findings = tracing_bound.analyze(paced(host, device, wall))
    assert [f.severity for f in findings] == ([] if expected is None else [expected])


def test_tracing_bound_is_placed_where_host_cpu_goes_not_at_the_sync(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("x = step(x)\ntorch_xla.sync()\n")
    samples = {f"{script}:2": 0.6, f"{script}:1": 0.3, "<library>": 0.1}
    data = paced(3e-3, 1e-3, 3e-3, host_samples={i: samples for i in range(8)})
    data.sources = SourceFiles([tmp_path])  # read only under a source root (issue 16)
    (finding,) = tracing_bound.analyze(data)
    assert finding.location == Location(str(script), 1)


def test_tracing_bound_shows_the_syncs_share_only_where_it_was_recorded() -> None:
    # GIVEN steps of 3 ms host CPU, 0.4-0.6 ms of it inside the sync that ended them
    data = paced(3e-3, 1e-3, 3e-3)
    for row, in_sync in zip(
        data.steps, [4e-4, 5e-4, 6e-4, 5e-4, 4e-4, 6e-4, 5e-4, 5e-4], strict=True
    ):
        row.sync_cpu_s = in_sync
    (finding,) = tracing_bound.analyze(data)
    assert finding.evidence["host_seconds_in_sync_per_step"] == 5e-4  # the median
    assert finding.evidence["host_seconds_per_step"] == 3e-3  # the verdict's basis is unchanged
    # a run without the split (older runs, xlaprof.step marks) has no such key, not a 0
    (finding,) = tracing_bound.analyze(paced(3e-3, 1e-3, 3e-3))
    assert "host_seconds_in_sync_per_step" not in finding.evidence


def test_a_run_without_executions_gets_no_verdict_and_says_why() -> None:
    # GIVEN the rows of a run an older xlaprof recorded (no executions.jsonl): ExecuteTime
    # holds the queue, so the device's own time per step is not known
    data = AnalysisInput(steps=steps(3e-3, 1e-3, 3e-3))
    # THEN no verdict, and the analyzer says what it needs
    assert tracing_bound.analyze(data) == []
    assert "executions.jsonl" in (tracing_bound.unmeasured(data) or "")


def test_a_device_bound_run_whose_host_ran_ahead_is_no_tracing_verdict() -> None:
    # GIVEN 1 ms host steps (1 ms of CPU each) whose graphs need 10 ms on the device: by
    # their syncs the steps are 1 ms apart and the device "idle" 90%, but the host queued
    # them; the device ran them back to back
    rows = steps(1e-3, 1e-3, 1e-3)
    start = rows[0].start
    from xlaprof.rundir.schema import ExecutionRow

    runs = [
        ExecutionRow(launch=start + (i + 1) * 1e-3, completion=start + 1e-3 + (i + 1) * 10e-3)
        for i in range(len(rows))
    ]
    data = AnalysisInput(steps=rows, execution_rows=runs)
    # THEN no tracing-bound finding: each step took 10 ms, its device busy all of it
    assert tracing_bound.analyze(data) == []
    assert data.device is not None
    assert [round(s.time_s, 6) for s in data.device.steps[2:]] == [0.01] * (len(rows) - 2)


# -- from a capture alone ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "expected"),
    [("device_bound_logging", False), ("tracing_bound_tiny_ops", True)],
    ids=["device_bound", "tracing_bound"],
)
def test_a_capture_alone_is_judged_on_the_hosts_measured_work(name: str, expected: bool) -> None:
    # GIVEN a capture the real profiler made (`xlaprof run --trace-steps 3:10`), read alone: a
    # device-bound loop that reads its loss every step (the host blocks in the read until the
    # device is done), and a loop of thousands of tiny ops a step
    trace = load_trace(step_model_capture(name))
    table = trace.tracing_vs_device()
    steady = table.sort_values("step").iloc[1:-1]  # a capture's first and last left out
    host = float(steady["host_busy_s"].median())
    device = float(steady["device_busy_s"].median())
    # WHEN tracing-bound is judged from it
    found = tracing_bound.analyze(AnalysisInput(trace=trace))
    # THEN it is called tracing-bound exactly when the host's measured work outlasts the
    # device's by the margin (never from the step time the runtime's events leave uncovered)
    assert (host >= tracing_bound.HOST_TO_DEVICE_MIN_RATIO * device) is expected
    assert bool(found) is expected
    if expected:
        (finding,) = found
        assert finding.evidence["host_seconds_per_step"] == pytest.approx(host, abs=1e-6)
        assert finding.cost is not None and finding.cost.per_step_s == pytest.approx(
            host - device, abs=2e-6
        )
    # AND the run's own analysis (its CPU clock, its metrics) gives the same verdict
    run = analyze(step_model_run(name))
    assert ("tracing_bound" in {f.kind.value for f in run}) is expected
