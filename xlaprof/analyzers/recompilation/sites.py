"""Recompiling sites from compilation events (PT_XLA_DEBUG analysis): grouped by the user's
source line, each site's warm-up judged on its own history, sites with one root cause reported
once, at the line that causes it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from xlaprof.analyzers.recompilation.advice import ADVICE, MAX_LISTED, SUGGESTION
from xlaprof.analyzers.shared.graph_diff import DYNAMIC_SHAPE_OPS, Explanation, explain
from xlaprof.analyzers.shared.sourcecode import (
    argument_origin,
    enclosing_function,
    loop_call_of,
    loop_reassignment,
    source_line,
)
from xlaprof.findings import Finding, Kind, Location, Severity
from xlaprof.model.input import AnalysisInput
from xlaprof.parse.debug_log import DebugEvent
from xlaprof.parse.frames import is_library_file, user_location
from xlaprof.rundir.reader import link_graphs

# A fixed-shape training loop compiles one graph at step 0 and another at step 1 (optimizer
# state appears), then never again.
WARMUP_GRAPHS_PER_SITE = 2
# Recompiling on at least this share of post-warm-up steps is an error, not a warning.
ERROR_RECOMPILE_STEP_SHARE = 0.5
# torch_xla's cause for the graphs the openxla backend compiles ("dynamo is compiling a FX
# graph to HLO") and runs
_DYNAMO_CAUSE = "dynamo"


def from_events(
    data: AnalysisInput, compilations: list[DebugEvent], skip: set[Location]
) -> list[Finding]:
    """One finding per cause of the sites that compile again after their warm-up; sites in
    ``skip`` (the calls of torch.compiled functions) are reported from dynamo's reasons."""
    timelines: dict[Location | None, list[DebugEvent]] = defaultdict(list)
    compiled_sites = {user_location(e.frames) for e in compilations}
    by_dynamo = any(r.kind == "compile" for r in data.dynamo)
    for event in data.debug.events:
        location = user_location(event.frames)
        if by_dynamo and event.cause and _DYNAMO_CAUSE in event.cause:
            continue  # dynamo's own compilations: reported from its reasons (dynamo.py)
        if location in compiled_sites and location not in skip:
            timelines[location].append(event)
    graph_of = link_graphs(data.graphs, compilations)
    dynamic = _dynamic_sites(data)
    groups: dict[tuple[object, ...], list[_Site]] = defaultdict(list)
    for location, events in timelines.items():
        _warmup, late = split_warmup(events)
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
        "graph_hashes": hashes[:MAX_LISTED],
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
        evidence["compile_steps"] = steps[: MAX_LISTED * 4]
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
        suggestion=ADVICE.get(explanation.kind, SUGGESTION) if explanation else SUGGESTION,
    )


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


@dataclass
class _Site:
    """The compilations one cut site (the user's line that ran the sync) made."""

    location: Location | None
    events: list[DebugEvent]
    late: list[DebugEvent]
    explanation: Explanation | None


def split_warmup(events: list[DebugEvent]) -> tuple[list[DebugEvent], list[DebugEvent]]:
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
    if explanation is not None and explanation.kind in ("structure", "constant"):
        return _difference_origin(explanation, site.location)
    if explanation is not None and explanation.inputs:
        return _input_origin(explanation, site.location)
    return site.location, None


def _difference_origin(
    explanation: Explanation, cut: Location | None
) -> tuple[Location | None, str | None]:
    """The user's line of the first op that differs between the graphs, or of the op that
    takes the changing constant; the cut site where that is library code or unknown."""
    where = (explanation.first_difference or {}).get("location")
    location = Location.parse(where) if isinstance(where, str) else None
    if location is None or is_library_file(location.file):
        return cut, None
    if explanation.kind == "constant":
        return location, "the op that takes the changing constant"
    return location, "the first op that differs between the graphs"


def _input_origin(
    explanation: Explanation, cut: Location | None
) -> tuple[Location | None, str | None]:
    """Where the input whose shape changes (a data-dependent one first) is made."""
    change = next((c for c in explanation.inputs if c.data_dependent), explanation.inputs[0])
    source = change.source
    if source is not None and not is_library_file(source.file):
        return _source_origin(source, cut)
    if cut is not None:
        line = argument_origin(cut.file, cut.line, 0)
        if line is not None:
            return Location(cut.file, line), "the assignment of the argument passed here"
    return cut, None


def _source_origin(source: Location, cut: Location | None) -> tuple[Location, str]:
    """The line to change for an input created at ``source`` in the user's code: where the loop
    around the cut site reassigns it, the step's call of the helper that makes it, or
    ``source`` itself."""
    if cut is None:
        return source, "where the input was created"
    line = loop_reassignment(source.file, source.line, cut.line)
    if line is not None:
        return (
            Location(source.file, line),
            f"reassigned inside the loop (created first at line {source.line})",
        )
    if source.file != cut.file:
        # made in a helper (make_batch): the step's call of it is the line to change
        function = enclosing_function(source.file, source.line)
        line = loop_call_of(cut.file, cut.line, function) if function else None
        if line is not None:
            return (
                Location(cut.file, line),
                f"the call in the step that makes the input (created at {source})",
            )
    return source, "where the input was created"


# Headlines of the kinds of change that need no detail.
_HEADLINES = {
    "structure": "same inputs, different graph structure",
    "nothing_visible": "no visible change in the graphs",
}


def _headline(explanation: Explanation | None) -> str | None:
    if explanation is None:
        return None
    if explanation.kind == "data_dependent":
        change = next(c for c in explanation.inputs if c.data_dependent)
        return f"data-dependent shape (aten::{change.data_dependent} at {change.source})"
    if explanation.kind == "input_shapes":
        first = explanation.inputs[0]
        dims = ", ".join(f"dim {d}" for d in first.varying_dims)
        return f"input {first.parameter} varies in {dims}"
    if explanation.kind == "constant":
        constant = (explanation.first_difference or {}).get("constant")
        return f"a constant baked into the graph changes ({constant})"
    return _HEADLINES.get(explanation.kind)
