"""CPU fallbacks (``xlaprof.analyzers.aten_fallback``): an aten op that ran on the CPU, at the
user's line, with or without the fallback tracker."""

from __future__ import annotations

import pytest
from helpers import findings_for, line_of

from xlaprof.findings import Kind


@pytest.mark.parametrize("with_tracker", [True, False])
def test_median_is_a_fallback_not_a_host_sync(samples, with_tracker: bool) -> None:
    paths = [samples / "cpu_fallback.log"]
    if with_tracker:
        paths.append(samples / "cpu_fallback.fallbacks")
    findings = findings_for(*paths)
    assert [f.kind for f in findings] == [Kind.ATEN_FALLBACK]
    finding = findings[0]
    assert finding.evidence["op"] == "aten::median" and finding.evidence["count"] == 12
    assert finding.location.line == line_of("cpu_fallback", "scale = torch.median")
    # the median ran 12 times (once a step), all at that line, each a copy to the host
    where = f"{finding.location.file}:{finding.location.line}"
    assert finding.evidence["sites"] == {where: 12} and finding.evidence["forces_host_sync"]
    # the line comes from the fallback tracker's stacks when its file is given; without it,
    # from the host reads the debug log records at that line, as many as the op's calls
    if with_tracker:
        assert finding.evidence["location_source"] == "fallback tracker"
    else:
        assert finding.evidence["location_source"] == (
            "inferred: host reads at this line match the op's call count"
        )
