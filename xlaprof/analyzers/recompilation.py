"""Recompilation: the same code keeps producing new graphs, so XLA compiles again and again.

Reads, best source first:
1. compilation events (PT_XLA_DEBUG analysis), grouped by the user's source line. A site that
   yields more distinct graphs than warm-up explains is recompiling. With step numbers (run
   directories) the test is exact: a site that compiled before and compiles again after the
   warm-up steps.
2. ``pt-xla-profiler: CompileTime too frequent`` lines.
3. metrics reports alone: compiles growing across snapshots, or many compiles per step.

Longer than the ~350 lines a module here aims for: one finding per root cause needs the
grouping, the per-site warm-up and the dynamo causes side by side; they are one analyzer.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from xlaprof.analyzers.shared.graph_diff import DYNAMIC_SHAPE_OPS, Explanation, explain
from xlaprof.analyzers.shared.sourcecode import (
    argument_origin,
    enclosing_function,
    loop_call_of,
    loop_reassignment,
    source_line,
)
from xlaprof.findings import Finding, Kind, Location, Severity
from xlaprof.model.input import COMPILE_METRICS, AnalysisInput
from xlaprof.parse.debug_log import DebugEvent
from xlaprof.parse.dynamo_log import DynamoRecord
from xlaprof.parse.frames import is_library_file, user_location
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
# torch_xla's cause for the graphs the openxla backend compiles ("dynamo is compiling a FX
# graph to HLO") and runs
_DYNAMO_CAUSE = "dynamo"

SUGGESTION = (
    "Keep tensor shapes static between steps: pad or bucket variable dimensions to a few fixed "
    "sizes, use drop_last=True in the DataLoader, and avoid Python branches on tensor values. "
    "Each distinct input shape or graph is compiled anew."
)


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not have looked at ``data`` (no compilation data), or None."""
    if data.compiles() is not None or data.debug.compilations():
        return None
    return "no compilation data in the input"


def analyze(data: AnalysisInput) -> list[Finding]:
    dynamo_findings, dynamo_sites = _from_dynamo(data)
    compilations = data.debug.compilations()
    if compilations:
        located = _from_events(data, compilations, dynamo_sites)
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
    "dynamo_shapes": (
        "torch.compile guards on each input's sizes: every new size compiles again (with the "
        "openxla backend, XLA compiles each size too). Pad or bucket that dimension to a few "
        "fixed sizes (drop_last=True for a DataLoader's short last batch), or mark it dynamic "
        "before the first call with torch._dynamo.mark_dynamic(x, dim)."
    ),
    "dynamo": (
        "A guard of the compiled function failed, so dynamo compiled it again: keep the value "
        "the guard names fixed between calls, or make it a tensor input."
    ),
    "constant": (
        "A Python number passed to an op (a shift, a size, an index, a slice bound) is baked "
        "into the graph as a constant, so each new value compiles a new graph. Keep it fixed, "
        "or pass it as a device tensor (torch.tensor(value, device=...)) and use an op that "
        "takes a tensor (torch.gather / index_select instead of a Python-int roll or slice)."
    ),
    "structure": (
        "The graph's structure changes between steps with the same inputs. Look at the line "
        "named: a Python `if` on a tensor value, a Python number that changes every step, or "
        "a code path taken only sometimes. Move the branch into the graph (torch.where) or "
        "make the value a tensor."
    ),
}


@dataclass
class _Site:
    """The compilations one cut site (the user's line that ran the sync) made."""

    location: Location | None
    events: list[DebugEvent]
    late: list[DebugEvent]
    explanation: Explanation | None


def _split_warmup(events: list[DebugEvent]) -> tuple[list[DebugEvent], list[DebugEvent]]:
    """A site's compilations -> (warm-up, later), judged on the site's own history.

    ``events`` are the site's compilation and execution events in log order. Warm-up is the
    site's first ``WARMUP_GRAPHS_PER_SITE`` compilations, as long as every execution before them
    ran a freshly compiled graph: optimizer state appears on a site's first calls, whatever the
    step number (a gradient-accumulation step first runs at step 3). A compilation after the
    site has once reused a cached graph, or beyond that count, is a recompilation. A site's
    first graph with no inputs computes constants: set-up work flushed by the loop's first sync
    (``total = torch.zeros(...)``), not counted.
    """
    warmup: list[DebugEvent] = []
    late: list[DebugEvent] = []
    cached_run_seen = False
    compiled_since_execution = False
    budget = WARMUP_GRAPHS_PER_SITE
    first = next((e for e in events if e.kind == "compilation"), None)
    if first is not None and first.graph_inputs == 0:
        budget += 1  # a graph of no inputs computes constants: set-up, not a training step
    for event in events:
        if event.kind == "compilation":
            if not cached_run_seen and len(warmup) < budget:
                warmup.append(event)
            else:
                late.append(event)
            compiled_since_execution = True
        else:
            if not compiled_since_execution:
                cached_run_seen = True
            compiled_since_execution = False
    return warmup, late


def _cause_key(site: _Site) -> tuple[object, ...]:
    """Sites with one root cause share a key: the same varying dimension values, the same op."""
    explanation = site.explanation
    if explanation is None:
        return ("site", site.location)
    if explanation.kind == "input_shapes":
        return (
            "shapes",
            tuple(
                sorted(
                    (dim, tuple(sorted(set(values))))
                    for change in explanation.inputs
                    for dim, values in change.varying_dims.items()
                )
            ),
        )
    if explanation.kind == "data_dependent":
        change = next(c for c in explanation.inputs if c.data_dependent)
        return ("data", change.data_dependent, change.source)
    if explanation.kind in ("structure", "constant") and explanation.first_difference:
        difference = explanation.first_difference
        return ("structure", difference.get("location") or difference.get("op"))
    return ("site", site.location)


def _origin(site: _Site) -> tuple[Location | None, str | None]:
    """The user's line that made the changing input, and how it was found."""
    explanation = site.explanation
    cut = site.location
    if explanation is not None and explanation.kind in ("structure", "constant"):
        where = (explanation.first_difference or {}).get("location")
        location = _parse_location(where) if isinstance(where, str) else None
        if location is not None and not is_library_file(location.file):
            return location, (
                "the op that takes the changing constant"
                if explanation.kind == "constant"
                else "the first op that differs between the graphs"
            )
        return cut, None
    if explanation is not None and explanation.inputs:
        change = next((c for c in explanation.inputs if c.data_dependent), explanation.inputs[0])
        source = change.source
        if source is not None and not is_library_file(source.file) and cut is not None:
            line = loop_reassignment(source.file, source.line, cut.line)
            if line is not None:
                return (
                    Location(source.file, line),
                    f"reassigned inside the loop (created first at line {source.line})",
                )
        if source is not None and not is_library_file(source.file):
            if cut is not None and source.file != cut.file:
                # made in a helper (make_batch): the step's call of it is the line to change
                function = enclosing_function(source.file, source.line)
                line = loop_call_of(cut.file, cut.line, function) if function else None
                if line is not None:
                    return (
                        Location(cut.file, line),
                        f"the call in the step that makes the input (created at {source})",
                    )
            return source, "where the input was created"
        if cut is not None:
            line = argument_origin(cut.file, cut.line, 0)
            if line is not None:
                return Location(cut.file, line), "the assignment of the argument passed here"
    return cut, None


def _parse_location(text: str) -> Location | None:
    file, _, line = text.rpartition(":")
    return Location(file, int(line)) if file and line.isdigit() else None


def _from_events(
    data: AnalysisInput, compilations: list[DebugEvent], skip: set[Location]
) -> list[Finding]:
    timelines: dict[Location | None, list[DebugEvent]] = defaultdict(list)
    compiled_sites = {user_location(e.frames) for e in compilations}
    by_dynamo = any(r.kind == "compile" for r in data.dynamo)
    for event in data.debug.events:
        location = user_location(event.frames)
        if by_dynamo and event.cause and _DYNAMO_CAUSE in event.cause:
            continue  # dynamo's own compilations: reported from its reasons (_from_dynamo)
        if location in compiled_sites and location not in skip:
            timelines[location].append(event)
    graph_of = link_graphs(data.graphs, compilations)
    dynamic = _dynamic_sites(data)
    groups: dict[tuple[object, ...], list[_Site]] = defaultdict(list)
    for location, events in timelines.items():
        _warmup, late = _split_warmup(events)
        if not late:
            continue
        compiled = [e for e in events if e.kind == "compilation"]
        graphs = [graph_of[id(e)] for e in compiled if id(e) in graph_of]
        site = _Site(location, compiled, late, explain(graphs, dynamic) if graphs else None)
        groups[_cause_key(site)].append(site)
    return [_group_finding(data, sites) for sites in groups.values()]


def _group_finding(data: AnalysisInput, sites: list[_Site]) -> Finding:
    """One finding for the sites that recompile for one cause, at the line that causes it."""
    primary = max(sites, key=lambda s: len(s.late))
    events = [e for s in sites for e in s.events]
    late = [e for s in sites for e in s.late]
    explanation = primary.explanation
    hashes = list(dict.fromkeys(e.graph_hash for e in events if e.graph_hash))
    location, how = _origin(primary)
    evidence: dict[str, object] = {
        "compiles_at_site": len(events),
        "distinct_graphs": len(hashes),
        "recompiles_after_warmup": len(late),
        "graph_hashes": hashes[:_MAX_LISTED],
        "causes": sorted({e.cause for e in events if e.cause}),
        "cut_sites": [str(s.location) for s in sites if s.location is not None],
    }
    if how is not None:
        evidence["location_is"] = how
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
    steps = [e.step for e in events if e.step is not None]
    if steps:
        evidence["compile_steps"] = steps[: _MAX_LISTED * 4]
        late_steps = {e.step for e in late if e.step is not None}
        first_late = min(late_steps) if late_steps else None
        later_steps = len(
            [s for s in data.steps if first_late is not None and s.step >= first_late]
        )
        if later_steps and len(late_steps) >= ERROR_RECOMPILE_STEP_SHARE * later_steps:
            severity = Severity.ERROR
    if location is not None and location.line:
        text = source_line(location.file, location.line)
        if text:
            evidence["source_text"] = text
    headline = _headline(explanation)
    return Finding(
        kind=Kind.RECOMPILATION,
        severity=severity,
        title=(
            f"Recompiling: {len(events)} compilations of {len(hashes)} different graphs "
            f"({len(late)} after warm-up)" + (f": {headline}" if headline else "")
        ),
        evidence=evidence,
        location=location,
        suggestion=_ADVICE.get(explanation.kind, SUGGESTION) if explanation else SUGGESTION,
    )


def _from_dynamo(data: AnalysisInput) -> tuple[list[Finding], set[Location]]:
    """torch.compile recompilations, one finding per cause (the compiled function and what its
    guard found changed), and the user lines that call compiled functions.

    XLA compilations made while dynamo compiles are synced from the line that calls the
    compiled function; those lines are returned so the lazy-tensor path does not report the
    same cause a second time.
    """
    calls: set[Location] = set()
    compiles_at: dict[Location, list[DynamoRecord]] = defaultdict(list)
    for record in data.dynamo:
        if record.kind == "compile" and record.user_frames:
            call = _parse_location(record.user_frames[0])
            if call is not None:
                calls.add(call)
                compiles_at[call].append(record)
    # One cause: one call of a compiled function and one kind of guard failure. A graph break
    # splits a function into several that dynamo compiles apiece (``forward`` and
    # ``torch_dynamo_resume_in_forward_at_9``), and all recompile for the one changed input.
    causes: dict[tuple[str | None, str | None], list[DynamoRecord]] = defaultdict(list)
    for record in data.dynamo:
        if record.kind == "recompile":
            call = record.user_frames[-1] if record.user_frames else record.code
            cause = re.sub(r"tensor '[^']*'", "tensor", record.cause or "")
            causes[(call, cause)].append(record)
    xla_steps: dict[int | None, int] = defaultdict(int)
    for event in data.debug.compilations():
        xla_steps[event.step] += 1
    findings = []
    for records in causes.values():
        first = records[0]
        code, cause = first.code, first.cause
        records = [r for r in records if r.function == first.function] or records
        call = _parse_location(first.user_frames[0]) if first.user_frames else None
        mismatches = [m for m in (r.mismatch for r in records) if m is not None]
        sizes = [mismatches[0].expected, *(m.actual for m in mismatches)] if mismatches else []
        dynamo_compiles = compiles_at.get(call, []) if call is not None else []
        steps = sorted({r.step for r in records if r.step is not None})
        evidence: dict[str, object] = {
            "compiled_function": f"{first.function} ({code})" if first.function else code,
            "recompiles": len(records),
            "guard_failure": cause,
            "dynamo_reasons": [r.reason for r in records[:_MAX_LISTED]],
            "recompile_steps": steps[: _MAX_LISTED * 4],
            "dynamo_compiles_at_call": len(dynamo_compiles),
            "xla_compilations_in_those_steps": sum(xla_steps[s] for s in steps),
        }
        if call is not None:
            evidence["call_site"] = str(call)
        if sizes:
            evidence["sizes_seen"] = sizes
            evidence["dimension"] = mismatches[0].dim
            evidence["input"] = mismatches[0].tensor
        location = call
        if call is not None and mismatches:
            index = _argument_index(mismatches[0].tensor)
            line = argument_origin(call.file, call.line, index if index is not None else 0)
            if line is not None:
                location = Location(call.file, line)
                evidence["location_is"] = "the assignment of the argument whose size changed"
        what = (
            f"{mismatches[0].tensor} dim {mismatches[0].dim} took sizes "
            + " → ".join(map(str, dict.fromkeys(sizes)))
            if mismatches
            else (cause or "a guard failed")
        )
        findings.append(
            Finding(
                kind=Kind.RECOMPILATION,
                severity=Severity.WARNING,
                title=(
                    f"torch.compile recompiled {first.function or 'a function'} "
                    f"{len(records)} times: {what}"
                ),
                evidence=evidence,
                location=location,
                suggestion=_ADVICE["dynamo_shapes" if mismatches else "dynamo"],
            )
        )
    return findings, calls


def _argument_index(tensor: str) -> int | None:
    """``args[0]`` -> 0; a parameter name (``x``, ``L['x']``) -> None."""
    match = re.match(r"args\[(\d+)\]", tensor)
    return int(match.group(1)) if match else None


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
    if explanation.kind == "constant":
        change = (explanation.first_difference or {}).get("constant")
        return f"a constant baked into the graph changes ({change})"
    if explanation.kind == "nothing_visible":
        return "no visible change in the graphs"
    return None
