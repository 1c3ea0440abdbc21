"""Judging budgets: each budget measured on each analyzed part, pure (results in, verdicts out)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xlaprof.analyzers import analyzer_of
from xlaprof.budgets.config import LIMITS, Budgets
from xlaprof.budgets.result import CheckResult, Outcome, RunCheck, Status
from xlaprof.findings import Coverage, Finding, Kind
from xlaprof.model.input import COMPILE_METRICS, AnalysisInput
from xlaprof.parse.metrics_report import HOST_SYNC_OP
from xlaprof.parse.units import format_seconds

if TYPE_CHECKING:
    from xlaprof.model.result import PartResult


@dataclass(frozen=True)
class _Context:
    result: PartResult
    baseline: PartResult | None
    budgets: Budgets

    @property
    def data(self) -> AnalysisInput:
        return self.result.part.data

    def findings(self, *kinds: Kind) -> list[Finding]:
        return [f for f in self.result.findings if f.kind in kinds]

    def unmeasured(self, kind: Kind) -> str | None:
        """Why ``kind`` could not be looked for here, as the analysis recorded it (asked of its
        analyzer where the result has no record), or None."""
        for entry in self.result.analyzers:
            if entry.kind is kind:
                return entry.why if entry.status is Coverage.NOT_MEASURED else None
        return analyzer_of(kind).unmeasured(self.data)


Measure = Callable[[_Context, Any], list[Outcome]]


def _figures(result: PartResult) -> dict[str, Any]:
    """The part's figures as the pipeline made them (diff shows the same); a result made
    by hand has them computed from its input."""
    from xlaprof.tables.compare import run_summary

    return result.figures or run_summary(result.part.data)


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
        run = part.run
        runs.append(
            RunCheck(
                name=part.name,
                path=str(run.path) if run is not None else ", ".join(s.path for s in part.sources),
                outcomes=outcomes,
                steps=part.data.step_count(),
                status=None if run is None else run.info.status,
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


def _after_warmup(data: AnalysisInput) -> list[Any]:
    return [s for s in data.steps if s.step >= data.warmup_steps]


def _no_steady_steps(data: AnalysisInput, later: list[Any]) -> str | None:
    """Why a per-step budget cannot be measured (no step rows, none after warm-up), or None."""
    if not data.steps:
        return _NEEDS_STEPS
    if not later:
        return f"no step after warm-up (steps ≥ {data.warmup_steps}) was recorded"
    return None


def _steps_text(steps: list[int]) -> str:
    shown = ", ".join(str(s) for s in steps[:_MAX_LISTED_STEPS])
    return shown + (", …" if len(steps) > _MAX_LISTED_STEPS else "")


def _recompilations(ctx: _Context, limit: int) -> list[Outcome]:
    data = ctx.data
    budget = "max-recompilations"
    later = _after_warmup(data)
    unmeasured = _no_steady_steps(data, later)
    if unmeasured:
        return [_verdict(budget, None, limit, "", unmeasured)]
    compiling = [s for s in later if s.compiles]
    value = sum(s.compiles for s in compiling)
    measured = f"compilations after warm-up (steps ≥ {data.warmup_steps}, {len(later)} steps)"
    if compiling:
        measured += f", at steps {_steps_text([s.step for s in compiling])}"
    evidence = {
        "warmup_steps": data.warmup_steps,
        "steps_after_warmup": len(later),
        "compile_steps": [s.step for s in compiling],
    }
    return [
        _verdict(budget, value, limit, "", measured, ctx.findings(Kind.RECOMPILATION), evidence)
    ]


def _host_syncs(ctx: _Context, limit: float) -> list[Outcome]:
    data = ctx.data
    budget = "max-host-syncs-per-step"
    later = _after_warmup(data)
    unmeasured = _no_steady_steps(data, later)
    if unmeasured:
        return [_verdict(budget, None, limit, "", unmeasured)]
    reads = [s.transfers_from_device for s in later]
    scalar = sum(s.aten.get(HOST_SYNC_OP, 0) for s in later)
    fallback = sum(v for s in later for k, v in s.aten.items() if k != HOST_SYNC_OP)
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
    data = ctx.data
    budget = "max-fallback-ops"
    allowed = ctx.budgets.allow_fallback
    if not data.reports and not data.steps:
        text = "no metrics report or per-step rows (the aten:: counters) to read"
        return [_verdict(budget, None, limit, "", text)]
    calls = {op: n for op, n in data.aten_fallbacks().items() if n}
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
    data = ctx.data
    budget = "max-graphs"
    compilations = data.debug.compilations()
    hashes = [e.graph_hash for e in compilations]
    compiles = data.compiles()
    if compilations and all(hashes):
        value: int | None = len(set(hashes))
        measured = f"distinct graphs compiled (by graph hash; {len(compilations)} compilations)"
    else:
        value = compiles
        measured = "graphs compiled (compilations: no graph hashes recorded)"
    if value is None:
        measured = "no compilation count in the input"
    evidence = {"compiles": compiles, "distinct_graph_hashes": len(set(hashes)) or None}
    findings = ctx.findings(Kind.RECOMPILATION, Kind.UNROLLED_LOOP)
    return [_verdict(budget, value, limit, "", measured, findings, evidence)]


def _compile_seconds(ctx: _Context, limit: float) -> list[Outcome]:
    data = ctx.data
    budget = "max-compile-seconds"
    value: float | None = None
    if data.reports:
        # torch_xla omits a metric that never had a sample: then no compilation happened.
        value = data.metric_total(*COMPILE_METRICS) or 0.0
        measured = f"compile time in the whole run ({data.compiles() or 0} compilations)"
    elif data.steps:
        value = sum(s.compile_s for s in data.steps)
        measured = f"compile time in the recorded steps ({sum(s.compiles for s in data.steps)} "
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
        "baseline": str(ctx.baseline.part.run.path if ctx.baseline.part.run else ""),
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
