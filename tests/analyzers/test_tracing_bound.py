"""The tracing-bound verdict (``xlaprof.analyzers.tracing_bound``) on fixed step rows: its
margins (host >= 1.5x device and device idle >= 30% of the step) and where it is placed. No
timing of this machine decides a verdict here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xlaprof.analyzers import tracing_bound
from xlaprof.findings import Location, Severity
from xlaprof.model.input import AnalysisInput
from xlaprof.model.sources import SourceFiles
from xlaprof.rundir.schema import StepRow


def steps(host: float, device: float, wall: float, count: int = 8) -> list[StepRow]:
    return [
        StepRow(step=i, wall_s=wall, host_cpu_s=host, executions=1, execute_s=device)
        for i in range(count)
    ]


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
    findings = tracing_bound.analyze(AnalysisInput(steps=steps(host, device, wall)))
    assert [f.severity for f in findings] == ([] if expected is None else [expected])


def test_tracing_bound_is_placed_where_host_cpu_goes_not_at_the_sync(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("x = step(x)\ntorch_xla.sync()\n")
    samples = {f"{script}:2": 0.6, f"{script}:1": 0.3, "<library>": 0.1}
    data = AnalysisInput(steps=steps(3e-3, 1e-3, 3e-3), host_samples={i: samples for i in range(8)})
    data.sources = SourceFiles([tmp_path])  # read only under a source root (issue 16)
    (finding,) = tracing_bound.analyze(data)
    assert finding.location == Location(str(script), 1)


def test_tracing_bound_shows_the_syncs_share_only_where_it_was_recorded() -> None:
    # GIVEN steps of 3 ms host CPU, 0.4-0.6 ms of it inside the sync that ended them
    rows = steps(3e-3, 1e-3, 3e-3)
    for row, in_sync in zip(rows, [4e-4, 5e-4, 6e-4, 5e-4, 4e-4, 6e-4, 5e-4, 5e-4], strict=True):
        row.sync_cpu_s = in_sync
    (finding,) = tracing_bound.analyze(AnalysisInput(steps=rows))
    assert finding.evidence["host_seconds_in_sync_per_step"] == 5e-4  # the median
    assert finding.evidence["host_seconds_per_step"] == 3e-3  # the verdict's basis is unchanged
    # a run without the split (older runs, xlaprof.step marks) has no such key, not a 0
    (finding,) = tracing_bound.analyze(AnalysisInput(steps=steps(3e-3, 1e-3, 3e-3)))
    assert "host_seconds_in_sync_per_step" not in finding.evidence
