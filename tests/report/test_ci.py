"""CI renderers (``xlaprof.report.ci``): GitHub Actions annotations and JUnit XML of a check."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from xlaprof.budgets import CheckResult, Outcome, RunCheck, Status
from xlaprof.findings import Finding, Kind, Location, Severity
from xlaprof.report.ci import github_annotations, junit_xml


def test_github_annotation_escaping_and_not_measured_junit() -> None:
    # GIVEN a failed budget whose finding sits in a file with a comma and a colon in its name,
    # and a message with a newline and a percent sign, plus a budget that was not measured
    finding = Finding(
        Kind.HOST_SYNC, Severity.WARNING, "read 100%\nof steps", location=Location("a,b:c.py", 7)
    )
    over = Outcome("max-host-syncs-per-step", Status.FAIL, 2, 1, "", "reads", [finding])
    unmeasured = Outcome("max-recompilations", Status.UNMEASURED, None, 0, "", "no steps")
    result = CheckResult([RunCheck("p", "runs/p", [over, unmeasured])])
    # WHEN rendered for GitHub and as JUnit
    first, second = github_annotations(result, workspace=None)
    # THEN properties escape , and : and the message escapes % and the newline
    assert first.startswith("::error file=a%2Cb%3Ac.py,line=7,title=xlaprof check%3A max-host")
    assert "read 100%25%0Aof steps" in first and "\n" not in first
    assert second == (
        "::error title=xlaprof check%3A max-recompilations::"
        "max-recompilations: not measured (no steps)"
    )
    root = ET.fromstring(junit_xml(result))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["max-recompilations"].find("failure").get("type") == "not_measured"
    assert root.get("failures") == "2"
