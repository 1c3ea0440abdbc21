"""Budgets for a CI gate (``xlaprof check``): what one run may cost, and the verdict on each.

A budget is a limit on one measured figure: compilations after warm-up, device→host reads per
step, CPU-fallback ops, distinct graphs, compile seconds, the median steady step against a
baseline run, or a finding kind that must not appear. ``config`` reads budgets from flags or a
TOML table, ``evaluate`` judges them (pure: budgets and analysis results in, a ``CheckResult``
out) and ``result`` holds the verdict and its plain-text report. Loading runs is
``xlaprof.pipeline.check_budgets``'s job; JSON, JUnit XML and GitHub annotations are renderers
(``xlaprof.report.ci``).

A figure that was not measured (a log with no per-step rows, a run with no steady step) is never
taken as zero: its budget is *not measured*, which fails unless ``allow_unmeasured`` is set
(then it is reported as skipped). A gate that passes because it saw nothing is no gate.
"""

from xlaprof.budgets.config import LIMITS, TABLE, Budgets, find_pyproject
from xlaprof.budgets.evaluate import MEASURES, evaluate
from xlaprof.budgets.result import CheckResult, Outcome, RunCheck, Status

__all__ = [
    "LIMITS",
    "MEASURES",
    "TABLE",
    "Budgets",
    "CheckResult",
    "Outcome",
    "RunCheck",
    "Status",
    "evaluate",
    "find_pyproject",
]
