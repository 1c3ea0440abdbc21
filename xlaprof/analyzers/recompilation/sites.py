"""Recompiling sites from compilation events (PT_XLA_DEBUG analysis): grouped by the user's
source line, each site's warm-up judged per graph on its own history, each late compile diffed
with the most similar earlier graph of its site, sites with one root cause reported once, at
the line that causes it.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from dataclasses import dataclass, field

from xlaprof.analyzers.recompilation import padding
from xlaprof.analyzers.recompilation.advice import (
    MAX_LISTED,
    augmentation_change,
    growing_accumulator,
    growth_suggestion,
    suggestion,
)
from xlaprof.analyzers.recompilation.growth import Growth, find_growth
from xlaprof.analyzers.shared.graph_diff import (
    DYNAMIC_SHAPE_OPS,
    KINDS,
    Explanation,
    GraphDiff,
    InputChange,
    Keys,
    diff,
    explain,
    merge,
    most_similar,
)
from xlaprof.analyzers.shared.sites import TENSOR_ACCESS_CAUSE
from xlaprof.analyzers.shared.sourcecode import (
    argument_origin,
    enclosing_function,
    enclosing_loop,
    loop_call_of,
    loop_of_moved_batch,
    loop_reassignment,
    pad_multiple,
    padding_call,
    source_line,
)
from xlaprof.findings import Finding, Kind, Location, Severity
from xlaprof.model.input import AnalysisInput
from xlaprof.model.sources import SourceFiles
from xlaprof.parse.debug_log import DebugEvent
from xlaprof.parse.frames import Frame, is_library_file, user_location
from xlaprof.rundir.reader import link_graphs
from xlaprof.rundir.schema import GraphInfo

# A fixed-shape training loop compiles at step 0 and again at step 1 (optimizer state appears),
# then never again: a site's first two steps that compiled are its warm-up (any number of graphs
# in them, e.g. an evaluation serving three fixed sizes), unless it ran a graph from its cache
# in an earlier step.
WARMUP_COMPILE_STEPS = 2
# Without step numbers (a pasted log): a budget of graphs per site.
WARMUP_GRAPHS_PER_SITE = 2
# Recompiling on at least this share of post-warm-up steps is an error, not a warning ...
ERROR_RECOMPILE_STEP_SHARE = 0.5
# ... when it happens on at least this many steps (one late compile at a run's last step is a
# one-time cost, whatever share of the steps after it that is).
ERROR_MIN_RECOMPILE_STEPS = 2
# torch_xla's cause for the graphs the openxla backend compiles ("dynamo is compiling a FX
# graph to HLO") and runs
_DYNAMO_CAUSE = "dynamo"

_CUT_SITE_NO_GRAPHS = (
    "the line that ran the sync: no graphs were kept to tell the cause (`xlaprof run` keeps them)"
)
_CUT_SITE = "the line that ran the sync: the graphs named no line of yours nearer the cause"


def _dynamic_sites(data: AnalysisInput) -> dict[Location, str]:
    """Frames where an op with a data-dependent output shape fell back to the CPU.

    Each fallback record gives two: its innermost frame outside torch (where the op was called,
    in a library or not: transformers' experts loop calls ``torch.where(mask)``), which is the
    line a graph input made from the result names, and its user frame.
    """
    sites = {}
    for record in data.debug.fallbacks:
        op = (record.op or "").removeprefix("aten::")
        if op not in DYNAMIC_SHAPE_OPS:
            continue
        innermost = next(
            (
                f
                for f in record.frames
                if f.file is not None and f.line is not None and not _TORCH_FILE.search(f.file)
            ),
            None,
        )
        if innermost is not None and innermost.file is not None and innermost.line is not None:
            sites[Location(innermost.file, innermost.line)] = op
        location = user_location(record.frames)
        if location is not None:
            sites[location] = op
    return sites


_TORCH_FILE = re.compile(r"[/\\]torch(_xla)?[/\\]")


@dataclass
class _Site:
    """The compilations one cut site (the user's line that ran the sync) made."""

    location: Location | None
    events: list[DebugEvent]  # every compilation at the site
    late: list[DebugEvent]  # recompilations: after warm-up, and not a graph first needed late
    explanation: Explanation | None
    first_needed: list[DebugEvent] = field(default_factory=list)  # new graphs compiled late
    graph_of: dict[int, GraphInfo] = field(default_factory=dict)  # compile event id -> graph
    executions: list[DebugEvent] = field(default_factory=list)  # the site's executions
    growth: Growth | None = None  # its graphs grow with every read (nothing syncs)

    @property
    def late_steps(self) -> frozenset[int]:
        return frozenset(e.step for e in self.late if e.step is not None)

    @property
    def rank(self) -> int:
        """How actionable the site's explanation is (lower first, as graph_diff.KINDS)."""
        kind = self.explanation.kind if self.explanation is not None else None
        return KINDS.index(kind) if kind in KINDS else len(KINDS)


def split_warmup(events: list[DebugEvent]) -> tuple[list[DebugEvent], list[DebugEvent]]:
    """A site's compilations -> (warm-up, later), judged per graph on the site's own history.

    ``events`` are the site's compilation and execution events in log order. With step numbers
    (run directories), warm-up is every compilation in the site's first
    ``WARMUP_COMPILE_STEPS`` steps that compiled, unless the site ran a graph from its cache in
    an earlier step: optimizer state appears on a site's second step, an evaluation that serves
    three fixed sizes compiles all three at its first call, and a library's per-layer or
    per-expert reads compile (and reuse) their graphs within the first step. A compilation in a
    step after the site reused a cached graph (a short last batch), or in a later compiling step
    (a new shape every step), is late.
    Without step numbers (a pasted log), the site's first ``WARMUP_GRAPHS_PER_SITE``
    compilations are warm-up, as long as no cached graph ran before them.
    """
    compiled = [e for e in events if e.kind == "compilation"]
    if not compiled or any(e.step is None for e in compiled):
        return _split_warmup_by_count(events)
    warmup: list[DebugEvent] = []
    late: list[DebugEvent] = []
    compile_steps: list[int] = []
    first_cached_step: int | None = None  # the first step in which the site reused a graph
    fresh: set[str | None] = set()  # compiled and not yet run
    for event in events:
        if event.kind == "compilation":
            assert event.step is not None
            if event.step not in compile_steps:
                compile_steps.append(event.step)
            in_window = compile_steps.index(event.step) < WARMUP_COMPILE_STEPS
            reused_before = first_cached_step is not None and first_cached_step < event.step
            (warmup if in_window and not reused_before else late).append(event)
            fresh.add(event.graph_hash)
        elif event.graph_hash is not None:
            if event.graph_hash in fresh:
                fresh.discard(event.graph_hash)
            elif first_cached_step is None and event.step is not None:
                first_cached_step = event.step
    return warmup, late


def _split_warmup_by_count(
    events: list[DebugEvent],
) -> tuple[list[DebugEvent], list[DebugEvent]]:
    """Warm-up without step numbers: a budget of graphs (see ``_split_warmup``). A site's first
    graph with no inputs computes constants (set-up work flushed by the loop's first sync) and
    is not counted."""
    warmup: list[DebugEvent] = []
    late: list[DebugEvent] = []
    cached_run_seen = False
    compiled_since_execution = False
    budget = WARMUP_GRAPHS_PER_SITE
    first = next((e for e in events if e.kind == "compilation"), None)
    if first is not None and first.graph_inputs == 0:
        budget += 1
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
    if site.growth is not None:
        return ("growth", site.location)
    if explanation is None:
        return ("site", site.location)
    if explanation.kind == "input_shapes":
        # two inputs sharing the varying dimension (input_ids and attention_mask padded to
        # one length) are one cause: each (dimension, values) pair counts once
        return (
            "shapes",
            tuple(
                sorted(
                    {
                        (dim, tuple(sorted(set(values))))
                        for change in explanation.inputs
                        for dim, values in change.varying_dims.items()
                    }
                )
            ),
        )
    if explanation.kind == "data_dependent":
        change = next(c for c in explanation.inputs if c.data_dependent)
        return ("data", change.data_dependent, change.op_source or change.source)
    if explanation.first_difference:
        difference = explanation.first_difference
        return ("op", difference.get("location") or difference.get("op_source"))
    return ("site", site.location)


def _grouped(sites: list[_Site]) -> list[list[_Site]]:
    """Sites that share a cause: the same cause key, or new graphs in exactly the same steps
    (GPT-2 decoding: the mask helper's read and the step's sync both compile at every step, for
    the one input that grows)."""
    parent = list(range(len(sites)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    first_of: dict[tuple[object, ...], int] = {}
    for index, site in enumerate(sites):
        keys = [_cause_key(site)]
        if site.late_steps:
            keys.append(("steps", site.late_steps))
        for key in keys:
            if key in first_of:
                parent[root(index)] = root(first_of[key])
            else:
                first_of[key] = index
    groups: dict[int, list[_Site]] = defaultdict(list)
    for index, site in enumerate(sites):
        groups[root(index)].append(site)
    return list(groups.values())


def _origin(sources: SourceFiles, site: _Site) -> tuple[Location | None, str | None, int | None]:
    """The user's line that causes the site's recompiles, how it was found, and the loop line
    that regrows the input (when that is the cause)."""
    explanation = site.explanation
    cut = site.location
    if explanation is not None and explanation.kind in ("input_shapes", "data_dependent"):
        change = next((c for c in explanation.inputs if c.data_dependent), explanation.inputs[0])
        found = _input_origin(sources, change, cut)
        if found is not None:
            return found
    elif explanation is not None and explanation.first_difference is not None:
        where = explanation.first_difference.get("location")
        location = Location.parse(where) if isinstance(where, str) else None
        if location is not None and not is_library_file(location.file):
            return location, _FOUND_BY.get(explanation.kind, "the op that differs"), None
    if cut is None:
        return None, None, None
    return cut, (_CUT_SITE if explanation is not None else _CUT_SITE_NO_GRAPHS), None


_FOUND_BY = {
    "baked_value": "the op that took the value baked in as a constant (its stack in the graph)",
    "constant": "the op that takes the changing constant",
    "attribute": "the op whose bounds or sizes changed",
    "sizes": "the op whose size changed",
    "parameters": "where the input that came or went is used",
    "structure": "the first op that differs between the graphs",
}


Origin = tuple[Location, str, int | None]  # the line, how it was found, a regrowing loop line


def _input_origin(sources: SourceFiles, change: InputChange, cut: Location | None) -> Origin | None:
    """Where a changing input comes from, in the user's code.

    The input's stack (HloProto) holds the user's frames that led to its first use. The frame
    in the loop that runs the sync is the step's own line: there the input was passed (to the
    model, to a helper) or made. A data-dependent shape is made by that call; an input passed
    there was bound earlier (``for data, target in loader``, or a name rebound in the loop to
    grow: ``tokens = torch.cat([tokens, nxt])``).
    """
    frames = change.user_frames or ((change.source,) if change.source is not None else ())
    if not frames:
        return None
    step_frame = _frame_in_loop(sources, frames, cut) or frames[0]
    if change.data_dependent:
        return step_frame, f"your call that runs aten::{change.data_dependent}", None
    if change.op_source == step_frame:  # the op that first used it is on this line
        return _made_origin(sources, step_frame, cut)
    maker = _made_by_call(sources, frames, step_frame)
    if maker is not None:  # x, y = make_batch(...): the step's call returned it
        return step_frame, f"the call in the step that makes the input (created at {maker})", None
    return _passed_origin(sources, step_frame, cut)


def _made_by_call(
    sources: SourceFiles, frames: tuple[Location, ...], call: Location
) -> Location | None:
    """The user frame below ``call`` in the input's stack whose function ``call``'s line calls:
    the input was made inside that call (a batch helper), not bound before it and passed."""
    for frame in frames:
        if frame == call:
            continue
        function = enclosing_function(sources, frame.file, frame.line)
        if function is None:
            continue
        if loop_call_of(sources, call.file, call.line, function) == call.line:
            return frame
    return None


def _made_origin(sources: SourceFiles, made: Location, cut: Location | None) -> Origin:
    """An input made on the user's line ``made``: its rebinding in the loop, the step's call of
    the helper that made it, or that line."""
    if cut is not None:
        line = loop_reassignment(sources, made.file, made.line, cut.line)
        if line is not None:
            how = f"reassigned inside the loop (created first at line {made.line})"
            return Location(made.file, line), how, line
        loop = loop_of_moved_batch(sources, made.file, made.line)
        if loop is not None:
            how = f"the loop that yields the batch (moved to the device at line {made.line})"
            return Location(made.file, loop), how, None
        if made.file != cut.file:
            # made in a helper (make_batch): the step's call of it is the line to change
            function = enclosing_function(sources, made.file, made.line)
            line = loop_call_of(sources, cut.file, cut.line, function) if function else None
            if line is not None:
                how = f"the call in the step that makes the input (created at {made})"
                return Location(cut.file, line), how, None
    return made, "where the input was created", None


def _passed_origin(sources: SourceFiles, passed: Location, cut: Location | None) -> Origin:
    """An input passed at the user's line ``passed`` (to the model): where that argument was
    bound, or the rebinding in the loop that grows it."""
    bound = argument_origin(sources, passed.file, passed.line, 0)
    if bound is None:
        return passed, "your call that passes the input", None
    if cut is not None and cut.file == passed.file:
        grown = loop_reassignment(sources, passed.file, bound, cut.line)
        if grown is not None:
            how = (
                f"reassigned inside the loop (created first at line {bound}; passed at "
                f"line {passed.line})"
            )
            return Location(passed.file, grown), how, grown
    return (
        Location(passed.file, bound),
        f"where the input passed at line {passed.line} is bound",
        None,
    )


def _frame_in_loop(
    sources: SourceFiles, frames: tuple[Location, ...], cut: Location | None
) -> Location | None:
    """The user frame inside the loop that holds the sync ``cut`` (or that ``cut`` heads)."""
    if cut is None:
        return None
    loops = {enclosing_loop(sources, cut.file, cut.line), cut.line} - {None}
    for frame in frames:
        if frame.file == cut.file and (
            frame.line == cut.line or enclosing_loop(sources, frame.file, frame.line) in loops
        ):
            return frame
    return None


# The constructors of torch_xla's sharding wrappers (FSDP, FSDPv2): they shard each wrapped
# submodule's parameters with a sync of its own, one graph per parameter shape, once.
_WRAPPER_FILE_RE = re.compile(
    r"torch_xla[/\\](?:distributed[/\\]fsdp[/\\]|experimental[/\\]spmd_fully_sharded)"
)


def _wrapper_setup(frames: list[Frame]) -> bool:
    """Whether an event was traced inside a sharding wrapper's constructor (its frames pass
    through ``__init__`` of torch_xla's FSDP or FSDPv2): set-up run once, whose graphs differ
    by the submodules' parameter shapes, not by anything a step feeds them."""
    return any(
        frame.function == "__init__" and frame.file and _WRAPPER_FILE_RE.search(frame.file)
        for frame in frames
    )


def from_events(
    data: AnalysisInput, compilations: list[DebugEvent], skip: set[Location]
) -> list[Finding]:
    timelines: dict[Location | None, list[DebugEvent]] = defaultdict(list)
    compiled_sites = {user_location(e.frames) for e in compilations}
    by_dynamo = any(r.kind == "compile" for r in data.dynamo)
    for event in data.debug.events:
        location = user_location(event.frames)
        if by_dynamo and event.cause and _DYNAMO_CAUSE in event.cause:
            continue  # dynamo's own compilations: reported from its reasons (_from_dynamo)
        if _wrapper_setup(event.frames):
            continue  # a sharding wrapper's one-time set-up graphs, not recompiles
        if location in compiled_sites and location not in skip:
            timelines[location].append(event)
    graph_of = link_graphs(data.graphs, compilations)
    dynamic = _dynamic_sites(data)
    sites = []
    for location, events in timelines.items():
        _warmup, late = split_warmup(events)
        if not late:
            continue
        compiled = [e for e in events if e.kind == "compilation"]
        site = _judge_late(data.sources, location, compiled, late, graph_of, dynamic)
        if site is not None and not _cached_per_value(site, events, data.sources):
            site.graph_of = graph_of
            site.executions = [e for e in events if e.kind == "execution"]
            sites.append(site)
    return [_group_finding(data, group) for group in _grouped(sites)]


# A site whose inputs take at most this many sizes, each compiled once and reused, serves fixed
# shapes (evaluation sets, buckets): it is not recompiling.
MAX_CACHED_SIZES = 3
# Padded sizes each first seen larger than all before, this many or more, follow the data.
GROWING_SIZES = 3


def _cached_per_value(site: _Site, events: list[DebugEvent], sources: SourceFiles) -> bool:
    """Whether the site's late compiles are only new sizes from a few fixed ones, each compiled
    once and reused (the site runs more graphs than it compiles): three evaluation index sets,
    or batches padded to two bucket sizes. A short last batch (one full size, then a smaller
    one) is not: drop_last removes its compiles. Nor are padded lengths that keep rising as
    the data goes on (56, 64, 72: each batch's longest rounded to a multiple): which sizes
    occur depends on the data seen so far, so their number grows with the data."""
    explanation = site.explanation
    if explanation is None or explanation.kind != "input_shapes" or not explanation.inputs:
        return False
    executions = [e for e in events if e.kind == "execution"]
    if len(executions) <= len(site.events):
        return False  # nothing reused
    for change in explanation.inputs:
        for dim, values in change.varying_dims.items():
            if len(set(values)) > MAX_CACHED_SIZES:
                return False
            if dim == 0 and len(set(values)) == 2 and values[-1] < values[0]:
                return False  # a short last batch
            if dim > 0 and _rising_padded_sizes(sources, site, values):
                return False
    return True


def _rising_padded_sizes(sources: SourceFiles, site: _Site, values: list[int]) -> bool:
    """Whether a padded dimension's sizes, in the order they were first compiled, each came
    in larger than every one before (at least ``GROWING_SIZES``), in a file that pads batches
    to their longest: sizes that follow the data, not buckets chosen up front."""
    firsts = list(dict.fromkeys(values))
    if len(firsts) < GROWING_SIZES or firsts != sorted(firsts):
        return False
    where = site.location
    return where is not None and padding_call(sources, where.file) is not None


def _judge_late(
    sources: SourceFiles,
    location: Location | None,
    compiled: list[DebugEvent],
    late: list[DebugEvent],
    graph_of: dict[int, GraphInfo],
    dynamic: dict[Location, str],
) -> _Site | None:
    """Compare each late compile with the most similar graph the site compiled before it.

    A variant of an earlier graph (something baked in, a shape changed) is a recompilation; a
    graph that aligns with none of them is new work first needed late (a logging or evaluation
    graph), a one-time cost. Without graphs every late compile counts.
    """
    site_graphs = [graph_of[id(e)] for e in compiled if id(e) in graph_of]
    growth = find_growth(compiled, graph_of)
    if growth is not None:
        # every late graph is the same work grown by what was traced since: no diff explains it
        return _Site(location, compiled, late, None, growth=growth)
    keys = Keys()
    recompiles: list[DebugEvent] = []
    first_needed: list[DebugEvent] = []
    diffs = []
    for event in late:
        graph_diff = _diff_earlier(sources, graph_of.get(id(event)), site_graphs, dynamic, keys)
        if graph_diff is not None and not graph_diff.variant:
            first_needed.append(event)
            continue
        recompiles.append(event)
        if graph_diff is not None:
            diffs.append(graph_diff)
    if not recompiles:
        return None
    explanation = None
    if diffs:
        # the warm-up graphs' own changes: the first values of what later changes
        warm = [graph_of.get(id(e)) for e in compiled if e not in late]
        context = [_diff_earlier(sources, g, site_graphs, dynamic, keys) for g in warm]
        explanation = merge(diffs, [d for d in context if d is not None], sources)
    elif len([g for g in site_graphs if g.hlo is not None]) >= 2:
        explanation = explain(site_graphs, dynamic, sources=sources)
    return _Site(location, compiled, recompiles, explanation, first_needed)


def _diff_earlier(
    sources: SourceFiles,
    graph: GraphInfo | None,
    site_graphs: list[GraphInfo],
    dynamic: dict[Location, str],
    keys: Keys,
) -> GraphDiff | None:
    """``graph`` diffed with the most similar graph its site compiled before it, if any."""
    if graph is None or graph.hlo is None:
        return None
    before = most_similar(graph, [g for g in site_graphs if g.order < graph.order], keys)
    return None if before is None else diff(before, graph, dynamic, keys, sources)


def _group_finding(data: AnalysisInput, sites: list[_Site]) -> Finding:
    """One finding for the sites that recompile for one cause, at the line that causes it."""
    growing = [s for s in sites if s.growth is not None]
    if growing:
        return _growth_finding(data, growing)
    primary = min(sites, key=lambda s: (s.rank, -len(s.late)))
    events = [e for s in sites for e in s.events]
    late = [e for s in sites for e in s.late]
    explanation = primary.explanation
    hashes = list(dict.fromkeys(e.graph_hash for e in events if e.graph_hash))
    location, how, grown = _origin(data.sources, primary)
    evidence = _site_evidence(sites, events, late, hashes)
    first_needed = [e for s in sites for e in s.first_needed]
    if first_needed:
        evidence["new_graphs_first_needed_late"] = len(first_needed)
    if how is not None:
        evidence["location_is"] = how
    if explanation is not None:
        evidence.update(_explanation_evidence(data.sources, explanation))
    severity = _severity(data, events, late, evidence)
    padded = _padded_sequence(data.sources, primary, location) if grown is None else None
    if padded is not None:
        location, how, dim, lengths = padded
        evidence["location_is"] = how
        evidence["sequence_dim"] = dim
        evidence["sequence_lengths_seen"] = lengths[: MAX_LISTED * 8]
        evidence["padding_choices"] = [c.record() for c in padding.choices(lengths)]
    transform_at, transform_headline = _transform_origin(
        explanation, grown is None and padded is None, evidence
    )
    location = transform_at or location
    text = source_line(data.sources, location.file, location.line) if location else None
    if text:
        evidence["source_text"] = text
    batches = _batch_sizes(explanation, text)
    headline = (
        transform_headline
        or (_accumulator_headline(explanation, grown, evidence) if padded is None else None)
        or _headline(explanation)
    )
    if batches is not None:
        headline = f"the loop's batches change size ({batches}): a short last batch"
    fix = suggestion(data.sources, explanation, grown, batches)
    if padded is not None:
        values = sorted(set(padded[3]))
        headline = (
            f"the sequence length (dim {padded[2]}) changes with each batch's padding "
            f"({len(values)} lengths: {', '.join(map(str, values[:_MAX_VALUES_SHOWN]))}"
            + (", …" if len(values) > _MAX_VALUES_SHOWN else "")
            + ")"
        )
        multiple = pad_multiple(data.sources, location.file, location.line) if location else None
        fix = padding.advice(
            padded[3], str(location) if location else None, padded[2], multiple=multiple
        )
    accounting = _accounting(events, late, first_needed, evidence)
    whose = _of_the_run(data, sites, len(events))
    return Finding(
        kind=Kind.RECOMPILATION,
        severity=severity,
        title=(
            f"Recompiling: {len(late)} of {len(events)} compilations{whose} "
            f"are recompiles a fix removes ({len(hashes)} different graphs)"
            + (f": {headline}" if headline else "")
            + accounting
        ),
        evidence=evidence,
        location=_said(location, evidence),
        suggestion=fix,
    )


def _of_the_run(data: AnalysisInput, sites: list[_Site], compiled: int) -> str:
    """Where the run compiled more graphs than the group's sites did (``compiled``): another
    site's, a read's own graph; the title's words that its count is the sites'
    (data_dependent_shape's said "3 of 5 compilations" above a counts table of 6)."""
    total = data.compiles()
    if total is None or total <= compiled:
        return ""
    where = "at this site" if len(sites) == 1 else f"at these {len(sites)} sites"
    return f" {where} (the run's {total})"


def _said(location: Location | None, evidence: dict[str, object]) -> Location | None:
    """``location`` with what it is (the rule that placed it, which the helpers above note in
    ``evidence`` as they choose the line) moved onto it: one fact, however it is rendered."""
    how = evidence.pop("location_is", None)
    if location is None or not how:
        return location
    return dataclasses.replace(location, what=str(how))


def _accounting(
    events: list[DebugEvent],
    late: list[DebugEvent],
    first_needed: list[DebugEvent],
    evidence: dict[str, object],
) -> str:
    """Which of the compiles are the cause, which warm-up, which graphs split off by mid-step
    reads (a read runs the graph traced so far as a graph of its own) and which new graphs
    first needed late; noted in ``evidence``, and the title's words for the rest."""
    counted = {id(e) for e in (*late, *first_needed)}
    rest = [e for e in events if id(e) not in counted]
    split = [e for e in rest if e.cause and TENSOR_ACCESS_CAUSE in e.cause]
    warm = len(rest) - len(split)
    evidence["compiles"] = {
        "total": len(events),
        "recompiles": len(late),
        "warm_up": warm,
        "split_off_by_reads": len(split),
        "first_needed_late": len(first_needed),
    }
    parts = [f"{warm} warm-up"] if warm else []
    if split:
        parts.append(f"{len(split)} graph(s) split off by mid-step reads in warm-up")
    if first_needed:
        parts.append(f"{len(first_needed)} new graph(s) first needed late")
    if not parts:
        return ""
    return f"; the other {len(rest) + len(first_needed)}: " + ", ".join(parts)


def _padded_sequence(
    sources: SourceFiles, site: _Site, origin: Location | None
) -> tuple[Location | None, str, int, list[int]] | None:
    """For an input whose varying dimension is not the batch (dim 0 fixed, a later one
    varies): the line that pads the batches (a collator, a tokenizer call), how it was found,
    the dimension and the lengths each step's graph had. None for any other change."""
    explanation = site.explanation
    if explanation is None or explanation.kind != "input_shapes":
        return None
    change = explanation.inputs[0]
    dims = sorted(change.varying_dims)
    if not dims or dims[0] == 0 or len(change.shapes[0]) < 2:
        return None
    dim = dims[0]
    lengths = _lengths_seen(site, change.parameter, dim)
    if not lengths:
        lengths = list(change.varying_dims[dim])
    where = origin or site.location
    found = padding_call(sources, where.file) if where is not None else None
    if where is None or found is None:
        return None  # a length that varies for another reason (a grown input, a slice)
    line, what = found
    return Location(where.file, line), f"where batches are padded: {what}", dim, lengths


def _lengths_seen(site: _Site, parameter: int, dim: int) -> list[int]:
    """The size of ``dim`` of input ``parameter`` in the graph each step ran first at the site
    (one per batch), from the site's compiled graphs."""
    by_hash = {
        event.graph_hash: graph
        for event in site.events
        if (graph := site.graph_of.get(id(event))) is not None and graph.hlo is not None
    }
    seen: dict[int, int] = {}
    for event in site.executions:
        graph = by_hash.get(event.graph_hash)
        if graph is None or graph.hlo is None or event.step is None or event.step in seen:
            continue
        params = graph.hlo.parameters
        dims = params[parameter].dims if parameter < len(params) else None
        if dims is not None and len(dims[1]) > dim:
            seen[event.step] = dims[1][dim]
    return list(seen.values())


def _site_evidence(
    sites: list[_Site], events: list[DebugEvent], late: list[DebugEvent], hashes: list[str]
) -> dict[str, object]:
    """What every recompilation finding at a group of sites says first: its compiles, the
    distinct graphs, those after warm-up, the graphs' hashes, causes and cut sites."""
    return {
        "compiles_at_site": len(events),
        "distinct_graphs": len(hashes),
        "recompiles_after_warmup": len(late),
        "graph_hashes": hashes[:MAX_LISTED],
        "causes": sorted({e.cause for e in events if e.cause}),
        "cut_sites": [str(s.location) for s in sites if s.location is not None],
    }


def _growth_finding(data: AnalysisInput, sites: list[_Site]) -> Finding:
    """Sites whose graphs grow with every read: one finding at the line that runs the reads."""
    primary = max(sites, key=lambda s: s.growth.ops[-1] if s.growth else 0)
    growth = primary.growth
    assert growth is not None
    events = [e for s in sites for e in s.events]
    late = [e for s in sites for e in s.late]
    hashes = list(dict.fromkeys(e.graph_hash for e in events if e.graph_hash))
    ops = growth.ops
    shown = " → ".join(f"{n:,}" for n in (ops if len(ops) <= 4 else (*ops[:2], ops[-1])))
    if len(ops) > 4:
        shown = shown.replace(f" → {ops[-1]:,}", f" → … → {ops[-1]:,}")
    location = primary.location
    evidence = _site_evidence(sites, events, late, hashes)
    evidence |= {
        "change_kind": "growth",
        "what_changed": (
            f"the graphs grow: {len(ops)} compiles read at {growth.read_at} hold "
            f"{ops[0]:,} to {ops[-1]:,} ops, more at every read"
        ),
        "graph_ops": list(ops[: MAX_LISTED * 4]),
        "read_at": growth.read_at,
        "growing_series": growth.series,
    }
    text = source_line(data.sources, location.file, location.line) if location else None
    if text:
        evidence["source_text"] = text
    severity = _severity(data, events, late, evidence)
    _accounting(events, late, [], evidence)  # the compiles' accounting, as for other sites
    return Finding(
        kind=Kind.RECOMPILATION,
        severity=severity,
        title=(
            f"Recompiling: {len(events)} compilations of {len(hashes)} different graphs at one "
            f"site, growing ({shown} ops): nothing syncs inside the loop, so each read compiles "
            "everything traced so far"
        ),
        evidence=evidence,
        location=(
            None
            if location is None
            else dataclasses.replace(
                location, what="the line whose reads each compile everything traced so far"
            )
        ),
        suggestion=growth_suggestion(data.sources, growth, location),
    )


def _explanation_evidence(sources: SourceFiles, explanation: Explanation) -> dict[str, object]:
    """What the graphs showed changed, as finding evidence."""
    evidence: dict[str, object] = {
        "what_changed": explanation.summary,
        "change_kind": explanation.kind,
    }
    if explanation.inputs:
        evidence["inputs"] = [
            {
                "parameter": c.parameter,
                "source": None if c.source is None else str(c.source),
                "op_source": None if c.op_source is None else str(c.op_source),
                "source_text": c.source_text,
                "shapes": [list(s) for s in c.shapes],
                "varying_dims": {str(k): v for k, v in c.varying_dims.items()},
                "data_dependent_op": c.data_dependent,
            }
            for c in explanation.inputs[:MAX_LISTED]
        ]
    if explanation.changes:
        evidence["graph_differences"] = [
            c.detail(sources) for c in explanation.changes[:MAX_LISTED]
        ]
    if explanation.first_difference is not None:
        evidence["first_difference"] = explanation.first_difference
    if explanation.diffs:
        evidence["compared"] = [
            {
                "late_graph": d.after.order,
                "step": d.after.step,
                "with_graph": d.before.order,
                "ops_aligned": round(d.similarity, 3),
                "change": d.kind,
            }
            for d in explanation.diffs[:MAX_LISTED]
        ]
    return evidence


def _severity(
    data: AnalysisInput,
    events: list[DebugEvent],
    late: list[DebugEvent],
    evidence: dict[str, object],
) -> Severity:
    """An error when recompiles happen on most steps from the first on (and on 2 or more);
    adds the compile steps to ``evidence``."""
    steps = [e.step for e in events if e.step is not None]
    if not steps:
        return Severity.WARNING
    evidence["compile_steps"] = steps[: MAX_LISTED * 4]
    late_steps = {e.step for e in late if e.step is not None}
    if len(late_steps) < ERROR_MIN_RECOMPILE_STEPS:
        return Severity.WARNING
    first_late = min(late_steps)
    later_steps = len([s for s in data.steps if s.step >= first_late])
    if later_steps and len(late_steps) >= ERROR_RECOMPILE_STEP_SHARE * later_steps:
        return Severity.ERROR
    return Severity.WARNING


def _batch_sizes(explanation: Explanation | None, loop_text: str | None) -> str | None:
    """``16 → 4`` when a ``for`` loop over batches yields the input whose dim 0 goes from one
    size to a smaller one (and back, epoch after epoch): a short last batch."""
    if explanation is None or explanation.kind != "input_shapes" or not loop_text:
        return None
    if not loop_text.startswith(("for ", "async for ")):
        return None
    sizes = next((c.varying_dims[0] for c in explanation.inputs if 0 in c.varying_dims), None)
    # one full size, then a smaller one (repeated each epoch): a short last batch, not buckets
    if sizes is None or len(set(sizes)) != 2 or sizes[1] >= sizes[0]:
        return None
    return f"{sizes[0]} → {sizes[1]}"


def _transform_origin(
    explanation: Explanation | None, applies: bool, evidence: dict[str, object]
) -> tuple[Location | None, str | None]:
    """Where a device-side data transform that draws new shapes is called (the user's line,
    not where its input was made) and the title's words for it, noted in ``evidence``; else
    (None, None)."""
    augmented = augmentation_change(explanation) if applies else None
    if augmented is None or augmented.source is None:
        return None, None
    evidence["location_is"] = "your call of the data transform that draws new shapes"
    evidence["transform_at"] = str(augmented.op_source)
    return augmented.source, (
        f"a data transform on the device draws new shapes each call "
        f"({_short_path(augmented.op_source)})"
    )


def _short_path(where: Location | None) -> str:
    """``where`` below site-packages (``torchvision/transforms/x.py:937``)."""
    if where is None:
        return "?"
    match = re.search(r"[/\\](?:site|dist)-packages[/\\](.+)$", where.file)
    return f"{match.group(1) if match else where.file}:{where.line}"


def _accumulator_headline(
    explanation: Explanation | None, grown: int | None, evidence: dict[str, object]
) -> str | None:
    """The title's words for a device-side accumulator (an input growing by the same step each
    compile), with its sizes and where it is concatenated added to ``evidence``; else None."""
    accumulator = growing_accumulator(explanation) if grown is None else None
    if accumulator is None:
        return None
    sizes = list(dict.fromkeys(accumulator.varying_dims.get(0) or []))
    evidence["accumulator_sizes"] = sizes[: MAX_LISTED * 4]
    if accumulator.op_source is not None:
        evidence["accumulator_at"] = str(accumulator.op_source)
        evidence["location_is"] = (
            "your call into the code that concatenates the accumulator "
            f"({_short_path(accumulator.op_source)})"
        )
    shown = " → ".join(map(str, sizes[:_MAX_VALUES_SHOWN]))
    return (
        f"a device-side accumulator grows by {sizes[1] - sizes[0]} each step "
        f"({shown}{' → …' if len(sizes) > _MAX_VALUES_SHOWN else ''})"
    )


def _headline(explanation: Explanation | None) -> str | None:
    """What changed, in a few words, for the finding's title."""
    if explanation is None:
        return None
    if explanation.kind == "data_dependent":
        change = next(c for c in explanation.inputs if c.data_dependent)
        where = change.op_source or change.source
        return f"data-dependent shape (aten::{change.data_dependent} at {where})"
    if explanation.kind == "input_shapes":
        change = explanation.inputs[0]
        dims = ", ".join(
            f"dim {d} takes {' → '.join(map(str, v[:_MAX_VALUES_SHOWN]))}"
            + (" → …" if len(v) > _MAX_VALUES_SHOWN else "")
            for d, v in change.varying_dims.items()
        )
        return f"input {change.parameter} ({change.dtype}) {dims}"
    headline = _HEADLINES.get(explanation.kind)
    if headline is None:
        return None
    difference = explanation.first_difference or {}
    before, after = difference.get("before"), difference.get("after")
    what = "slice bounds" if "slice=" in str(before) else "op attributes"
    return headline.format(
        before=_bare(before),
        after=_clip(_bare(after)),
        value=after,
        what=what,
    )


def _bare(value: object) -> str:
    """An attribute's value without its name (``slice={[0:10]}`` -> ``{[0:10]}``)."""
    return str(value).replace("slice=", "")


# Titles by kind of change (``graph_diff.KINDS``), filled from the first difference (its line
# is the finding's location).
_HEADLINES = {
    "baked_value": "a value passed as device data was baked in as the constant {value}",
    "constant": "a constant baked into the graph changes ({before} → {after})",
    "attribute": "{what} baked into the graph change ({before} → {after})",
    "sizes": "sizes change with the same inputs ({before} → {after})",
    "parameters": "the graph's inputs differ",
    "structure": "the graph's ops differ",
    "nothing_visible": "no visible change in the graphs",
}


_MAX_VALUES_SHOWN = 6


def _clip(value: object, limit: int = 3) -> str:
    """The first few of an ``a → b → c → …`` chain of values."""
    parts = str(value).split(" → ")
    return " → ".join(parts[:limit]) + (" → …" if len(parts) > limit else "")
