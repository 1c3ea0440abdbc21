"""Comparing two runs (``xlaprof.tables.compare``): which findings are gone and which are
new."""

from __future__ import annotations


def test_diff_keeps_location_less_findings_apart() -> None:
    from xlaprof.findings import Finding, Kind, Location, Severity
    from xlaprof.tables.compare import match_findings

    def finding(title: str, location: Location | None = None) -> Finding:
        return Finding(Kind.ATEN_FALLBACK, Severity.WARNING, title, location=location)

    here = Location("train.py", 3)
    before = [
        finding("aten::median ran on the CPU 12 times"),
        finding("aten::nonzero x 4"),
        finding("at 3", here),
    ]
    after = [finding("aten::median ran on the CPU 20 times"), finding("at 3 again", here)]
    gone, new = match_findings(before, after)
    assert gone == ["aten::nonzero x 4"] and new == []
