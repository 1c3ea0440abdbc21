"""Judging budgets: each budget measured on each analyzed part, pure (results in, verdicts out)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xlaprof.analyzers import analyzer_of
from xlaprof.budgets.config import LIMITS, Budgets
from xlaprof.budgets.result import CheckResult, Outcome, RunCheck, Status
from xlaprof.findings import Coverage, Finding, Kind
from xlaprof.model.result import CheckFigures
from xlaprof.model.warmup import first_steady_step
from xlaprof.parse.units import format_seconds

if TYPE_CHECKING:
    from xlaprof.model.input import AnalysisInput
    from xlaprof.model.result import Counts, PartResult, StepCount


@dataclass(frozen=True)
class _Context:
    result: PartResult
    baseline: PartResult | None
    budgets: Budgets

    @property
    def checked(self) -> CheckFigures:
        """The figures the pipeline measured for the budgets (a document saved without them:
        nothing measured)."""
        return self.result.checked or _NOTHING_CHECKED

    @property
    def counts(self) -> Counts:
        """The part's counts (a document saved without them: none measured)."""
        from xlaprof.model.result import Counts

        if self.result.counts is not None:
            return self.result.counts
        return Counts(None, None, None, None, {}, "", False, self.result.part.warmup_steps)

    @property
    def warmup_steps(self) -> int:
        return self.budgets.warmup_steps

    @property
    def first_steady(self) -> int:
        """The first step number after warm-up: the first ``warmup_steps`` checked steps by
        position are warm-up (``model.warmup``), as in the analysis."""
        steps = self.checked.steps
        compiles = [float(s.compiles) for s in steps]  # 0: compiled nothing
        return first_steady_step([s.step for s in steps], self.warmup_steps, compiles)

    def findings(self, *kinds: Kind) -> list[Finding]:
        return [f for f in self.result.findings if f.kind in kinds]

    def unmeasured(self, kind: Kind) -> str | None:
        """Why ``kind`` could not be looked for here, as the analysis recorded it (a document
        saved without that record: asked of its analyzer, on an input of nothing), or None."""
        for entry in self.result.analyzers:
            if entry.kind is kind:
                return entry.why if entry.status is Coverage.NOT_MEASURED else None
        return analyzer_of(kind).unmeasured(_nothing(self.result))


Measure = Callable[[_Context, Any], list[Outcome]]


def _figures(result: PartResult) -> Mapping[str, Any]:
    """The part's figures as the pipeline made them (diff shows the same); a document saved
    without them: the figures the budgets read, none measured."""
    return result.figures or _NOTHING_MEASURED


# The figures the step-time budget reads, of a document saved without figures: no steady step.
_NOTHING_MEASURED: Mapping[str, Any] = {
    "step_median_s": None,
    "step_spread_s": None,
    "steady_steps": 0,
}


def _nothing(result: PartResult) -> AnalysisInput:
    """An analyzer input of nothing, with ``result``'s warm-up: what a document saved without
    its figures or analyzer records measured."""
    from xlaprof.model.input import AnalysisInput

    return AnalysisInput(warmup_steps=result.part.warmup_steps)


# What a document saved without its budget figures measured: nothing.
_NOTHING_CHECKED = CheckFigures(
    steps=[],
    has_reports=False,
    report_compile_s=None,
    logged_compilations=0,
    graph_hashes=0,
    all_hashed=True,
    run_path=None,
    run_status=None,
)


def evaluate(
    budgets: Budgets, results: list[PartResult], baseline: list[PartResult] | None = None
) -> CheckResult:
    """Check every budget on every analyzed part (one per process run).

    With several baseline parts, part *i* is compared with baseline part *i* when the counts
    match (ranks of the same job), else with the first. Raises ``BudgetError`` for budgets that
    cannot be checked (none at all: a check of nothing would pass whatever the run did).
    """
    budgets.validate()
    runs = []
    for index, result in enumerate(results):
        base = None
        if baseline:
            base = baseline[index] if len(baseline) == len(results) else baseline[0]
        context = _Context(result, base, budgets)
        outcomes: list[Outcome] = []
        for attribute in LIMITS:
            limit = getattr(budgets, attribute)
            if attribute == "max_fallback_ops" and limit is None and budgets.allow_fallback:
                limit = 0
            if limit is None or limit == ():
                continue
            outcomes.extend(MEASURES[attribute](context, limit))
        if budgets.allow_unmeasured:
            for outcome in outcomes:
                if outcome.status is Status.UNMEASURED:
                    outcome.status = Status.SKIPPED
        part = result.part
        checked = context.checked
        path = checked.run_path or ", ".join(s.path for s in part.sources)
        if result.read_from is not None:
            path = f"{result.read_from} (a saved result)"
        runs.append(
            RunCheck(
                name=part.name,
                path=path,
                outcomes=outcomes,
                steps=context.counts.steps,
                status=checked.run_status,
            )
        )
    return CheckResult(runs)


def _verdict(
    budget: str,
    value: float | None,
    limit: float,
    unit: str,
    measured: str,
    findings: list[Finding] | None = None,
    evidence: dict[str, Any] | None = None,
) -> Outcome:
    status = Status.UNMEASURED
    if value is not None:
        status = Status.PASS if value <= limit else Status.FAIL
    return Outcome(
        budget=budget,
        status=status,
        value=value,
        limit=limit,
        unit=unit,
        measured=measured,
        findings=list(findings or []) if status is not Status.PASS else [],
        evidence=evidence or {},
    )


_MAX_LISTED_STEPS = 12
_NEEDS_STEPS = "needs per-step rows: profile the script with `xlaprof run` or xlaprof.profile()"


def _after_warmup(ctx: _Context) -> list[StepCount]:
    return [s for s in ctx.checked.steps if s.step >= ctx.first_steady]


def _no_steady_steps(ctx: _Context, later: list[StepCount]) -> str | None:
    """Why a per-step budget cannot be measured (no step rows, none after warm-up), or None."""
    if not ctx.checked.steps:
        return _NEEDS_STEPS
    if not later:
        return f"no step after warm-up (steps ≥ {ctx.first_steady}) was recorded"
    return None


def _steps_text(steps: list[int]) -> str:
    shown = ", ".join(str(s) for s in steps[:_MAX_LISTED_STEPS])
    return shown + (", …" if len(steps) > _MAX_LISTED_STEPS else "")


def _recompilations(ctx: _Context, limit: int) -> list[Outcome]:
    budget = "max-recompilations"
    later = _after_warmup(ctx)
    unmeasured = _no_steady_steps(ctx, later)
    if unmeasured:
        return [_verdict(budget, None, limit, "", unmeasured)]
    compiling = [s for s in later if s.compiles]
    value = sum(s.compiles for s in compiling)
    measured = f"compilations after warm-up (steps ≥ {ctx.first_steady}, {len(later)} steps)"
    if compiling:
        measured += f", at steps {_steps_text([s.step for s in compiling])}"
    evidence = {
        "warmup_steps": ctx.warmup_steps,
        "steps_after_warmup": len(later),
        "compile_steps": [s.step for s in compiling],
    }
    return [
        _verdict(budget, value, limit, "", measured, ctx.findings(Kind.RECOMPILATION), evidence)
    ]


def _host_syncs(ctx: _Context, limit: float) -> list[Outcome]:
    budget = "max-host-syncs-per-step"
    later = _after_warmup(ctx)
    unmeasured = _no_steady_steps(ctx, later)
    if unmeasured:
        return [_verdict(budget, None, limit, "", unmeasured)]
    reads = [s.reads for s in later]
    scalar = sum(s.scalar_reads for s in later)
    fallback = sum(s.fallback_calls for s in later)
    value = sum(reads) / len(later)
    measured = (
        f"device→host reads per step after warm-up (mean of {len(later)} steps, max {max(reads)};"
        f" {scalar} by .item(), {fallback} CPU-fallback calls in all)"
    )
    findings = ctx.findings(Kind.HOST_SYNC)
    if fallback:
        findings += [
            f for f in ctx.findings(Kind.ATEN_FALLBACK) if f.evidence.get("forces_host_sync")
        ]
    evidence = {
        "steps_after_warmup": len(later),
        "reads": sum(reads),
        "max_per_step": max(reads),
        "local_scalar_dense": scalar,
        "fallback_calls": fallback,
    }
    return [_verdict(budget, _round(value), limit, "", measured, findings, evidence)]


def _fallback_ops(ctx: _Context, limit: int) -> list[Outcome]:
    budget = "max-fallback-ops"
    allowed = ctx.budgets.allow_fallback
    if not ctx.checked.has_reports and not ctx.checked.steps:
        text = "no metrics report or per-step rows (the aten:: counters) to read"
        return [_verdict(budget, None, limit, "", text)]
    calls = {op: n for op, n in ctx.counts.aten_fallbacks.items() if n}
    counted = {op: n for op, n in calls.items() if op not in allowed}
    measured = "distinct aten:: ops run on the CPU"
    if allowed:
        measured += f", not counting {', '.join(allowed)}"
    if calls:
        measured += ": " + ", ".join(f"{op} ×{n}" for op, n in calls.items())
    findings = [f for f in ctx.findings(Kind.ATEN_FALLBACK) if f.evidence.get("op") in counted]
    evidence = {"ops": calls, "allowed": list(allowed), "counted": sorted(counted)}
    return [_verdict(budget, len(counted), limit, "", measured, findings, evidence)]


def _graphs(ctx: _Context, limit: int) -> list[Outcome]:
    budget = "max-graphs"
    checked = ctx.checked
    compiles = ctx.counts.compiles
    if checked.logged_compilations and checked.all_hashed:
        value: int | None = checked.graph_hashes
        measured = (
            f"distinct graphs compiled (by graph hash; {checked.logged_compilations} compilations)"
        )
    else:
        value = compiles
        measured = "graphs compiled (compilations: no graph hashes recorded)"
    if value is None:
        measured = "no compilation count in the input"
    evidence = {"compiles": compiles, "distinct_graph_hashes": checked.graph_hashes or None}
    findings = ctx.findings(Kind.RECOMPILATION, Kind.UNROLLED_LOOP)
    return [_verdict(budget, value, limit, "", measured, findings, evidence)]


def _compile_seconds(ctx: _Context, limit: float) -> list[Outcome]:
    budget = "max-compile-seconds"
    checked = ctx.checked
    value: float | None = None
    if checked.has_reports:
        value = checked.report_compile_s
        measured = f"compile time in the whole run ({ctx.counts.compiles or 0} compilations)"
    elif checked.steps:
        value = sum(s.compile_s for s in checked.steps)
        measured = f"compile time in the recorded steps ({sum(s.compiles for s in checked.steps)} "
        measured += "compilations)"
    else:
        measured = "no metrics report or per-step rows in the input"
    findings = ctx.findings(Kind.SLOW_COMPILE, Kind.RECOMPILATION, Kind.UNROLLED_LOOP)
    return [_verdict(budget, _round(value), limit, "s", measured, findings)]


def _step_time_ratio(ctx: _Context, limit: float) -> list[Outcome]:
    budget = "max-step-time-ratio"
    if ctx.baseline is None:
        return [_verdict(budget, None, limit, "x", "no baseline run to compare with")]
    mine, base = _figures(ctx.result), _figures(ctx.baseline)
    evidence = {
        "median_s": mine["step_median_s"],
        "spread_s": mine["step_spread_s"],
        "steady_steps": mine["steady_steps"],
        "baseline_median_s": base["step_median_s"],
        "baseline_spread_s": base["step_spread_s"],
        "baseline_steady_steps": base["steady_steps"],
        "baseline": _where(ctx.baseline),
    }
    measured = (
        f"median steady step {_steady_text(mine)} vs baseline {_steady_text(base)}"
        " (steady: after warm-up, no compilation; IQR = spread)"
    )
    if not mine["step_median_s"] or not base["step_median_s"]:
        which = "this run" if not mine["step_median_s"] else "the baseline"
        measured = f"no steady step in {which}: {measured}"
        return [_verdict(budget, None, limit, "x", measured, evidence=evidence)]
    ratio = mine["step_median_s"] / base["step_median_s"]
    before = {(f.kind, f.location) for f in ctx.baseline.findings}
    new = [f for f in ctx.result.findings if (f.kind, f.location) not in before]
    return [_verdict(budget, _round(ratio), limit, "x", measured, new, evidence)]


def _where(result: PartResult) -> str:
    """The run a result was made from, or the saved document it was read from ("" for
    neither)."""
    if result.read_from is not None:
        return result.read_from
    checked = result.checked
    if checked is not None:
        return checked.run_path or ""
    return result.part.run_path or ""


def _steady_text(summary: Mapping[str, Any]) -> str:
    spread = summary["step_spread_s"]
    return (
        f"{format_seconds(summary['step_median_s'])} (IQR "
        f"{format_seconds(spread) if spread is not None else '—'}, "
        f"{summary['steady_steps']} steps)"
    )


def _forbid(ctx: _Context, kinds: tuple[str, ...]) -> list[Outcome]:
    outcomes = []
    for name in kinds:
        kind = Kind(name)
        found = ctx.findings(kind)
        missing = ctx.unmeasured(kind)
        budget = f"forbid {name}"
        if missing is not None and not found:
            outcomes.append(_verdict(budget, None, 0, "", missing))
            continue
        measured = f"{name} findings" + (
            ": " + "; ".join(f.title for f in found[:3]) if found else ""
        )
        outcomes.append(_verdict(budget, len(found), 0, "", measured, found))
    return outcomes


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


# How each limit (``config.LIMITS``) is measured and judged.
MEASURES: dict[str, Measure] = {
    "max_recompilations": _recompilations,
    "max_host_syncs_per_step": _host_syncs,
    "max_fallback_ops": _fallback_ops,
    "max_graphs": _graphs,
    "max_compile_seconds": _compile_seconds,
    "max_step_time_ratio": _step_time_ratio,
    "forbid": _forbid,
}
