"""A check's verdict: each budget's value against its limit, per run, and the report they make.

``str(CheckResult)`` is the plain-text report (``xlaprof check`` prints it; pytest shows it for
``assert result.ok, result``); JSON, JUnit XML and GitHub annotations are renderers
(``xlaprof.report.ci``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from xlaprof import escape
from xlaprof.findings import Finding
from xlaprof.parse.units import NOT_MEASURED, format_seconds

if TYPE_CHECKING:
    pass


class Status(StrEnum):
    """A budget's verdict. ``unmeasured`` fails; ``skipped`` is unmeasured and allowed."""

    PASS = "pass"
    FAIL = "fail"
    UNMEASURED = "unmeasured"
    SKIPPED = "skipped"

    @property
    def ok(self) -> bool:
        return self in (Status.PASS, Status.SKIPPED)


@dataclass
class Outcome:
    """One budget checked on one run: the value, the limit, the verdict and why."""

    budget: str  # the option name, e.g. "max-recompilations" or "forbid tracing_bound"
    status: Status
    value: float | None
    limit: float
    unit: str  # "" (a count), "s" (seconds), "x" (a ratio)
    measured: str  # what the value is, in words, with the numbers behind it
    findings: list[Finding] = field(default_factory=list)  # those that explain a failure
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status.ok

    def value_text(self) -> str:
        return _format(self.value, self.unit)

    def limit_text(self) -> str:
        return _format(self.limit, self.unit)

    def line(self) -> str:
        """One summary line: verdict, budget, value against limit, what was measured."""
        if self.value is None:
            verdict = f"not measured (limit {self.limit_text()})"
        else:
            sign = "≤" if self.status is Status.PASS else ">"
            verdict = f"{self.value_text()} {sign} {self.limit_text()}"
        label = {"pass": "pass", "fail": "FAIL", "unmeasured": "FAIL", "skipped": "skip"}
        return f"{label[self.status.value]:<4}  {self.budget:<24} {verdict:<18}  {self.measured}"

    def explanation(self) -> str | None:
        """The first finding that explains a failure, with its user line, or None."""
        if self.ok or not self.findings:
            return None
        finding = self.findings[0]
        where = f" at {finding.location.described()}" if finding.location is not None else ""
        return f"{finding.kind.value}: {finding.title}{where}"


@dataclass
class RunCheck:
    """Every budget checked on one process's run."""

    name: str
    path: str
    outcomes: list[Outcome]
    steps: int | None = None
    status: str | None = None  # how the run ended (run directories)

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)


class CheckResult(str):
    """The verdict of ``xlaprof check``: ``ok`` when every budget of every run is met.

    A ``CheckResult`` is its own report: a ``str`` whose text is what ``xlaprof check`` prints
    (each run, each budget's value against its limit, the finding that explains a failure at the
    user's line, a summary line). So ``assert result.ok, result`` shows the whole report in a
    pytest failure: pytest shows a message that is a ``str`` as it is, and any other object as a
    ``repr`` cut to 240 characters. Its truth value is ``ok``.
    """

    runs: list[RunCheck]

    def __new__(cls, runs: list[RunCheck]) -> CheckResult:
        result = super().__new__(cls, _report(runs))
        result.runs = runs
        return result

    def __repr__(self) -> str:
        return (
            f"<CheckResult {'ok' if self.ok else 'FAILED'}: {len(self.outcomes)} budgets, "
            f"{len(self.failures)} not met>"
        )

    @property
    def ok(self) -> bool:
        return all(run.ok for run in self.runs)

    def __bool__(self) -> bool:
        return self.ok

    @property
    def outcomes(self) -> list[Outcome]:
        return [o for run in self.runs for o in run.outcomes]

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]

    def summary(self) -> str:
        return _summary(self.runs)


def _summary(runs: list[RunCheck]) -> str:
    outcomes = [o for run in runs for o in run.outcomes]
    over = sum(o.status is Status.FAIL for o in outcomes)
    unmeasured = sum(o.status is Status.UNMEASURED for o in outcomes)
    skipped = sum(o.status is Status.SKIPPED for o in outcomes)
    if all(run.ok for run in runs):
        text = f"xlaprof check: passed: {len(outcomes) - skipped} of {len(outcomes)} budgets met"
        return text + (f", {skipped} not measured (allowed)" if skipped else "")
    parts = []
    if over:
        parts.append(f"{over} over budget")
    if unmeasured:
        parts.append(f"{unmeasured} not measured")
    return f"xlaprof check: FAILED: {' and '.join(parts)} (of {len(outcomes)} budgets)"


def _report(runs: list[RunCheck]) -> str:
    lines = []
    for run in runs:
        about = []
        if run.steps is not None:
            about.append(f"{run.steps} steps")
        if run.status is not None:
            about.append(f"ended {run.status}")
        lines.append(f"{run.path}" + (f" ({', '.join(about)})" if about else ""))
        for outcome in run.outcomes:
            lines.append("  " + outcome.line())
            explanation = outcome.explanation()
            if explanation is not None:
                lines.append(f"        why: {explanation}")
    lines.append(_summary(runs))
    # Paths, names and finding titles come from the run: each line stays one line, with no
    # control character, and none can be read as a GitHub workflow command.
    return escape.no_commands("\n".join(escape.terminal(line) for line in lines))


def _format(value: float | None, unit: str) -> str:
    if value is None:
        return NOT_MEASURED
    if unit == "s":
        return format_seconds(value)
    if unit == "x":
        return f"{value:.2f}x"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.2f}"
