"""Recompilation: the same code keeps producing new graphs, so XLA compiles again and again.

Reads, best source first:
1. compilation events (PT_XLA_DEBUG analysis), grouped by the user's source line. A site that
   compiles a variant of one of its graphs after its warm-up is recompiling; with the graphs
   (run directories), what changed between them says why and where.
2. ``pt-xla-profiler: CompileTime too frequent`` lines.
3. metrics reports alone: compiles growing across snapshots, or many compiles per step.

The first source is ``sites``, torch.compile's own reasons (which come before all three) are
``dynamo``, and what each finding advises is ``advice``.
"""

from __future__ import annotations

from xlaprof.analyzers.recompilation.advice import MAX_LISTED, SUGGESTION
from xlaprof.analyzers.recompilation.dynamo import from_dynamo
from xlaprof.analyzers.recompilation.ranks import from_ranks
from xlaprof.analyzers.recompilation.sites import WARMUP_GRAPHS_PER_SITE, from_events
from xlaprof.analyzers.recompilation.torchtpu import from_torchtpu
from xlaprof.analyzers.shared.capture_compiles import NO_DATA, capture_compile_spans, spans_note
from xlaprof.analyzers.shared.costs import StepCosts
from xlaprof.findings import Cost, Finding, Kind, Severity
from xlaprof.model.input import COMPILE_METRICS, AnalysisInput

# Metrics-only heuristics: more compiles than warm-up and either this many in all...
METRICS_MIN_COMPILES_ABSOLUTE = 10
# ... or at least this many compiles per step.
METRICS_MIN_COMPILES_PER_STEP = 0.2


COMPILE_BASIS = (
    "compile time (CompileTime; in a traced step its compile spans) of the steps after "
    "warm-up it compiled in"
)


def price(findings: list[Finding], costs: StepCosts) -> None:
    """What each recompilation cost the run: the compile time of the steps after warm-up it
    compiled in (``evidence["compile_steps"]``), paid once per new graph; per step as well
    where it compiled in more than half the steps after warm-up (it recurs). Two findings
    that compiled in one step (one cause split in parts, or two causes in one step) share
    that step's compile time equally, and a step named twice by one finding is paid once, so
    the findings' costs add up to no more than the run compiled. No cost where none of a
    finding's steps' compile time was measured."""
    from collections import Counter

    warmup = costs.first_steady
    steps_of = [
        sorted({int(s) for s in f.evidence.get("compile_steps") or [] if int(s) >= warmup})
        for f in findings
    ]
    holders = Counter(step for steps in steps_of for step in steps)
    after = costs.after_warmup
    for finding, steps in zip(findings, steps_of, strict=True):
        paid = [costs.compile_s[s] / holders[s] for s in steps if s in costs.compile_s]
        if not paid:
            continue
        total = sum(paid)
        recurs = len(after) > 0 and len(steps) > len(after) / 2
        shared = any(holders[s] > 1 for s in steps if s in costs.compile_s)
        basis = COMPILE_BASIS
        if shared:
            basis += ", shared equally with the other findings that compiled in the same steps"
        finding.cost = Cost(
            per_step_s=total / len(after) if recurs else None,
            one_time_s=None if recurs else total,
            run_s=total,
            steps=len(paid),
            basis=basis,
        )


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not have looked at ``data`` (no compilation data; a capture's
    compile spans name no graph to compare), or None."""
    if data.compiles() is not None or data.debug.compilations() or data.dynamo:
        return None
    spans = capture_compile_spans(data)
    if spans:
        return (
            f"{spans_note(spans)} name no graph to compare (compile_in_step judges a "
            "capture's compiles after warm-up)"
        )
    return NO_DATA


def analyze(data: AnalysisInput) -> list[Finding]:
    dynamo_findings, dynamo_sites = from_dynamo(data)
    dynamo_findings += from_ranks(data) + from_torchtpu(data)
    compilations = data.debug.compilations()
    if compilations:
        located = from_events(data, compilations, dynamo_sites)
        if located or dynamo_findings:
            return dynamo_findings + located
    elif dynamo_findings:
        return dynamo_findings
    findings = [
        Finding(
            kind=Kind.RECOMPILATION,
            severity=Severity.WARNING,
            title=f"CompileTime too frequent: {note.count} compiles during {note.steps} steps",
            evidence={"compiles": note.count, "steps": note.steps, "log_line": note.line},
            suggestion=SUGGESTION,
        )
        for note in data.debug.too_frequent
        if note.metric == "CompileTime"
    ]
    if findings or compilations:
        # Compilation events are the best evidence: when they show no recompiling site, the
        # weaker step and metrics heuristics must not say otherwise.
        return findings
    if data.steps:
        return _from_steps(data)
    return _from_metrics(data)


def _from_steps(data: AnalysisInput) -> list[Finding]:
    first = data.first_steady_step()
    late = [s for s in data.steps if s.step >= first and s.compiles > 0]
    if len(late) < 1 or not any(s.compiles for s in data.steps if s.step < first):
        return []
    return [
        Finding(
            kind=Kind.RECOMPILATION,
            severity=Severity.WARNING,
            title=f"Compiling again after warm-up on {len(late)} steps",
            evidence={
                "compile_steps": [s.step for s in late][: MAX_LISTED * 4],
                "compiles_after_warmup": sum(s.compiles for s in late),
                "compile_seconds_after_warmup": round(sum(s.compile_s for s in late), 6),
            },
            suggestion=SUGGESTION,
        )
    ]


def _from_metrics(data: AnalysisInput) -> list[Finding]:
    counts = [r.metric_samples(*COMPILE_METRICS) for r in data.reports]
    series = [c for c in counts if c is not None]
    if not series:
        return []
    compiles = series[-1]
    steps = data.step_count()
    evidence: dict[str, object] = {"compiles": compiles, "steps": steps}
    growing = len(series) >= 3 and series[-1] > series[1]
    many = compiles > WARMUP_GRAPHS_PER_SITE and (
        compiles >= METRICS_MIN_COMPILES_ABSOLUTE
        or (steps is not None and steps > 0 and compiles / steps >= METRICS_MIN_COMPILES_PER_STEP)
    )
    if not (growing or many):
        return []
    if growing:
        evidence["compiles_per_snapshot"] = series[: MAX_LISTED * 4]
        title = f"Compile count kept growing across snapshots: {series[0]} → {series[-1]}"
    elif steps is not None:
        title = f"{compiles} compilations in {steps} steps: more than warm-up explains"
    else:
        # a pasted report without a MarkStep counter: how many steps ran is not measured
        title = (
            f"{compiles} compilations: more than warm-up explains (the number of steps is not "
            "in the report)"
        )
    total = data.metric_total(*COMPILE_METRICS)
    if total is not None:
        evidence["compile_seconds"] = round(total, 6)
    return [
        Finding(
            kind=Kind.RECOMPILATION,
            severity=Severity.WARNING,
            title=title,
            evidence=evidence,
            suggestion=SUGGESTION
            + " Run with PT_XLA_DEBUG_LEVEL=2 (or under `xlaprof run`) to see the source line.",
        )
    ]
