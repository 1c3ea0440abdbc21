"""Recompilation: the same code keeps producing new graphs, so XLA compiles again and again.

Reads, best source first:
1. compilation events (PT_XLA_DEBUG analysis), grouped by the user's source line. A site that
   yields more distinct graphs than warm-up explains is recompiling. With step numbers (run
   directories) the test is exact: a site that compiled before and compiles again after the
   warm-up steps.
2. ``pt-xla-profiler: CompileTime too frequent`` lines.
3. metrics reports alone: compiles growing across snapshots, or many compiles per step.
"""

from __future__ import annotations

from collections import defaultdict

from xlaprof.analysis.graph_diff import DYNAMIC_SHAPE_OPS, Explanation, explain
from xlaprof.analysis.model import COMPILE_METRICS, AnalysisInput
from xlaprof.findings import Finding, Kind, Location, Severity
from xlaprof.parse.debug_log import DebugEvent
from xlaprof.parse.frames import user_location
from xlaprof.rundir.reader import link_graphs

# A fixed-shape training loop compiles one graph at step 0 and another at step 1 (optimizer
# state appears), then never again.
WARMUP_GRAPHS_PER_SITE = 2
# Metrics-only heuristics: more compiles than warm-up and either this many in all...
METRICS_MIN_COMPILES_ABSOLUTE = 10
# ... or at least this many compiles per step.
METRICS_MIN_COMPILES_PER_STEP = 0.2
# Recompiling on at least this share of post-warm-up steps is an error, not a warning.
ERROR_RECOMPILE_STEP_SHARE = 0.5
_MAX_LISTED = 8

SUGGESTION = (
    "Keep tensor shapes static between steps: pad or bucket variable dimensions to a few fixed "
    "sizes, use drop_last=True in the DataLoader, and avoid Python branches on tensor values. "
    "Each distinct input shape or graph is compiled anew."
)


def analyze(data: AnalysisInput) -> list[Finding]:
    compilations = data.debug.compilations()
    if compilations:
        located = _from_events(data, compilations)
        if located:
            return located
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


def _dynamic_sites(data: AnalysisInput) -> dict[Location, str]:
    """Lines where an op with a data-dependent output shape fell back to the CPU."""
    sites = {}
    for record in data.debug.fallbacks:
        op = (record.op or "").removeprefix("aten::")
        if op in DYNAMIC_SHAPE_OPS:
            location = user_location(record.frames)
            if location is not None:
                sites[location] = op
    return sites


_ADVICE = {
    "input_shapes": (
        "An input's shape changes between steps. Pad or bucket that dimension to a few fixed "
        "sizes (for a batch dimension: drop_last=True in the DataLoader, or pad the last "
        "batch), or mark it dynamic (torch._dynamo.mark_dynamic) when compiling with "
        "torch.compile(backend='openxla')."
    ),
    "data_dependent": (
        "A shape depends on the data (nonzero, boolean masking, unique): each new count is a "
        "new graph. Keep shapes fixed: multiply by the mask or use torch.where(mask, x, 0) "
        "instead of selecting rows, and reduce with the mask as a weight."
    ),
    "structure": (
        "The graph's structure changes between steps with the same inputs. Look at the line "
        "named: a Python `if` on a tensor value, a Python number that changes every step, or "
        "a code path taken only sometimes. Move the branch into the graph (torch.where) or "
        "make the value a tensor."
    ),
}


def _from_events(data: AnalysisInput, compilations: list[DebugEvent]) -> list[Finding]:
    sites: dict[Location | None, list[DebugEvent]] = defaultdict(list)
    for event in compilations:
        sites[user_location(event.frames)].append(event)
    graph_of = link_graphs(data.graphs, compilations)
    dynamic = _dynamic_sites(data)
    findings = []
    for location, events in sites.items():
        hashes = list(dict.fromkeys(e.graph_hash for e in events if e.graph_hash))
        steps = [e.step for e in events if e.step is not None]
        if len(steps) == len(events):
            late = [e for e in events if e.step is not None and e.step >= data.warmup_steps]
            recompiling = bool(late) and len(events) > len(late)
            recompiles = len(late)
        else:
            recompiling = max(len(hashes), len(events)) > WARMUP_GRAPHS_PER_SITE
            recompiles = max(len(hashes), len(events)) - WARMUP_GRAPHS_PER_SITE
        if not recompiling:
            continue
        graphs = [graph_of[id(e)] for e in events if id(e) in graph_of]
        explanation = explain(graphs, dynamic) if graphs else None
        evidence: dict[str, object] = {
            "compiles_at_site": len(events),
            "distinct_graphs": len(hashes),
            "recompiles_after_warmup": recompiles,
            "graph_hashes": hashes[:_MAX_LISTED],
            "causes": sorted({e.cause for e in events if e.cause}),
        }
        if explanation is not None:
            evidence["what_changed"] = explanation.summary
            evidence["change_kind"] = explanation.kind
            if explanation.inputs:
                evidence["inputs"] = [
                    {
                        "parameter": c.parameter,
                        "source": None if c.source is None else str(c.source),
                        "source_text": c.source_text,
                        "shapes": [list(s) for s in c.shapes],
                        "varying_dims": {str(k): v for k, v in c.varying_dims.items()},
                        "data_dependent_op": c.data_dependent,
                    }
                    for c in explanation.inputs
                ]
            if explanation.first_difference is not None:
                evidence["first_difference"] = explanation.first_difference
        severity = Severity.WARNING
        if steps:
            evidence["compile_steps"] = steps[: _MAX_LISTED * 4]
            later_steps = len([s for s in data.steps if s.step >= data.warmup_steps])
            if later_steps and recompiles >= ERROR_RECOMPILE_STEP_SHARE * later_steps:
                severity = Severity.ERROR
        findings.append(
            Finding(
                kind=Kind.RECOMPILATION,
                severity=severity,
                title=(
                    f"Recompiling: {len(events)} compilations of {len(hashes)} "
                    f"different graphs ({recompiles} after warm-up)"
                    + (f": {headline}" if (headline := _headline(explanation)) else "")
                ),
                evidence=evidence,
                location=location,
                suggestion=_ADVICE.get(explanation.kind, SUGGESTION) if explanation else SUGGESTION,
            )
        )
    return findings


def _from_steps(data: AnalysisInput) -> list[Finding]:
    late = [s for s in data.steps if s.step >= data.warmup_steps and s.compiles > 0]
    if len(late) < 1 or not any(s.compiles for s in data.steps if s.step < data.warmup_steps):
        return []
    return [
        Finding(
            kind=Kind.RECOMPILATION,
            severity=Severity.WARNING,
            title=f"Compiling again after warm-up on {len(late)} steps",
            evidence={
                "compile_steps": [s.step for s in late][: _MAX_LISTED * 4],
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
        evidence["compiles_per_snapshot"] = series[: _MAX_LISTED * 4]
        title = f"Compile count kept growing across snapshots: {series[0]} → {series[-1]}"
    else:
        title = f"{compiles} compilations in {steps} steps: more than warm-up explains"
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


def _headline(explanation: Explanation | None) -> str | None:
    if explanation is None:
        return None
    if explanation.kind == "data_dependent":
        change = next(c for c in explanation.inputs if c.data_dependent)
        return f"data-dependent shape (aten::{change.data_dependent} at {change.source})"
    if explanation.kind == "input_shapes":
        change = explanation.inputs[0]
        dims = ", ".join(f"dim {d}" for d in change.varying_dims)
        return f"input {change.parameter} varies in {dims}"
    if explanation.kind == "structure":
        return "same inputs, different graph structure"
    if explanation.kind == "nothing_visible":
        return "no visible change in the graphs"
    return None
