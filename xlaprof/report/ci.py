"""What ``xlaprof check`` writes: its report, the JSON document, JUnit XML, GitHub annotations.

Renderers only: each takes a ``CheckResult`` and presents it. The report is ``str(result)``, so
pytest and the command line show the same text.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, TextIO

from xlaprof import escape
from xlaprof.budgets import CheckResult, Outcome, Status
from xlaprof.report.base import RenderOptions

SCHEMA = "xlaprof.check/1"


def check_document(result: CheckResult) -> dict[str, Any]:
    """The ``xlaprof check --json`` document (``xlaprof.check/1``, docs/json-format.md)."""
    return {
        "schema": SCHEMA,
        "ok": result.ok,
        "summary": result.summary(),
        "runs": [
            {
                "name": run.name,
                "path": run.path,
                "steps": run.steps,
                "status": run.status,
                "ok": run.ok,
                "budgets": [_outcome_json(o) for o in run.outcomes],
            }
            for run in result.runs
        ],
    }


def _outcome_json(outcome: Outcome) -> dict[str, Any]:
    return {
        "budget": outcome.budget,
        "status": outcome.status.value,
        "ok": outcome.ok,
        "value": outcome.value,
        "limit": outcome.limit,
        "unit": outcome.unit,
        "measured": outcome.measured,
        "evidence": outcome.evidence,
        "findings": [f.to_json() for f in outcome.findings],
    }


def dumps(result: CheckResult) -> str:
    from xlaprof.report.json_out import strict_json

    return json.dumps(strict_json(check_document(result)), indent=2, allow_nan=False)


def _failure_text(outcome: Outcome) -> str:
    """The body of a failure: the summary line, then each explaining finding in full."""
    lines = [outcome.line().strip()]
    for finding in outcome.findings:
        where = f"{finding.location.described()}: " if finding.location is not None else ""
        lines.append(f"{where}{finding.kind.value}: {finding.title}")
        evidence = "; ".join(f"{k}={v}" for k, v in finding.evidence.items())
        if evidence:
            lines.append(f"  evidence: {evidence}")
        if finding.suggestion:
            lines.append(f"  fix: {finding.suggestion}")
    return "\n".join(lines)


def _message(outcome: Outcome) -> str:
    """One line: the budget, value against limit, and the first finding that explains it."""
    if outcome.value is None:
        text = f"{outcome.budget}: not measured ({outcome.measured})"
    else:
        text = f"{outcome.budget}: {outcome.value_text()} > {outcome.limit_text()}"
        text += f" ({outcome.measured})"
    explanation = outcome.explanation()
    return text + (f". {explanation}" if explanation else "")


def junit_xml(result: CheckResult) -> str:
    """JUnit XML: a testsuite per run, a testcase per budget, the finding in the failure."""
    suites = ET.Element("testsuites", name="xlaprof check")
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for run in result.runs:
        failures = sum(o.status in (Status.FAIL, Status.UNMEASURED) for o in run.outcomes)
        skipped = sum(o.status is Status.SKIPPED for o in run.outcomes)
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=f"xlaprof check {run.path}",
            tests=str(len(run.outcomes)),
            failures=str(failures),
            errors="0",
            skipped=str(skipped),
        )
        totals["tests"] += len(run.outcomes)
        totals["failures"] += failures
        totals["skipped"] += skipped
        for outcome in run.outcomes:
            case = ET.SubElement(
                suite, "testcase", classname=f"xlaprof.check.{run.name}", name=outcome.budget
            )
            location = next((f.location for f in outcome.findings if f.location), None)
            if location is not None:
                case.set("file", location.file)
                case.set("line", str(location.line))
            if outcome.status is Status.FAIL:
                failure = ET.SubElement(
                    case, "failure", message=_message(outcome), type="over_budget"
                )
                failure.text = _failure_text(outcome)
            elif outcome.status is Status.UNMEASURED:
                failure = ET.SubElement(
                    case, "failure", message=_message(outcome), type="not_measured"
                )
                failure.text = _failure_text(outcome)
            elif outcome.status is Status.SKIPPED:
                ET.SubElement(case, "skipped", message=f"not measured: {outcome.measured}")
            else:
                ET.SubElement(case, "system-out").text = outcome.line().strip()
    for key, value in totals.items():
        suites.set(key, str(value))
    for element in suites.iter():  # names, paths and messages from the run: always legal XML
        element.attrib = {k: escape.xml_text(v, newlines=False) for k, v in element.attrib.items()}
        element.text = None if element.text is None else escape.xml_text(element.text)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _escape_data(text: str) -> str:
    return escape.github_data(text)  # controls visible, then the runner's own escapes


def _escape_property(text: str) -> str:
    return escape.github_property(text)


def _workspace_path(file: str, workspace: str | None) -> str:
    """``file`` relative to the checkout (GITHUB_WORKSPACE) when it is inside it, so the
    annotation lands on the file in the pull request; unchanged otherwise."""
    if not workspace:
        return file
    try:
        return str(Path(file).resolve().relative_to(Path(workspace).resolve()))
    except ValueError:
        return file


def github_annotations(result: CheckResult, workspace: str | None = None) -> list[str]:
    """GitHub Actions workflow commands: ``::error`` for each failed budget (at the user's line
    of the finding that explains it, where known, relative to ``workspace``), ``::warning`` for
    each allowed unmeasured one.
    """
    lines = []
    for run in result.runs:
        for outcome in run.outcomes:
            if outcome.status is Status.PASS:
                continue
            command = "warning" if outcome.status is Status.SKIPPED else "error"
            properties = []
            location = next((f.location for f in outcome.findings if f.location), None)
            if location is not None:
                path = _workspace_path(location.file, workspace)
                properties += [f"file={_escape_property(path)}", f"line={location.line}"]
            title = f"xlaprof check: {outcome.budget}"
            if len(result.runs) > 1:
                title += f" ({run.name})"
            properties.append(f"title={_escape_property(title)}")
            lines.append(f"::{command} {','.join(properties)}::{_escape_data(_message(outcome))}")
    return lines


def write_text(result: CheckResult, out: TextIO, options: RenderOptions) -> None:
    # names from the run: controls visible, no line a workflow command
    out.write(escape.no_commands(escape.terminal(result, newlines=True)) + "\n")


def write_json(result: CheckResult, out: TextIO, options: RenderOptions) -> None:
    out.write(dumps(result) + "\n")


def write_junit(result: CheckResult, out: TextIO, options: RenderOptions) -> None:
    out.write(junit_xml(result))


def write_github(result: CheckResult, out: TextIO, options: RenderOptions) -> None:
    for line in github_annotations(result, options.workspace):
        out.write(line + "\n")
