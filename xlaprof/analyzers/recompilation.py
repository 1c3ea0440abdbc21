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
from dataclasses import dataclass, field

from xlaprof.analyzers.shared.graph_diff import (
    DYNAMIC_SHAPE_OPS,
    KINDS,
    Explanation,
    InputChange,
    Keys,
    diff,
    explain,
    merge,
    most_similar,
)
from xlaprof.analyzers.shared.sourcecode import (
    argument_origin,
    enclosing_class,
    enclosing_function,
    enclosing_loop,
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
from xlaprof.rundir.schema import GraphInfo

# A fixed-shape training loop compiles at step 0 and again at step 1 (optimizer state appears),
# then never again: a site's first two steps that compiled are its warm-up (any number of graphs
# in them, e.g. an evaluation serving three fixed sizes), as long as it has not yet run a graph
# from its cache.
WARMUP_COMPILE_STEPS = 2
# Without step numbers (a pasted log): a budget of graphs per site.
WARMUP_GRAPHS_PER_SITE = 2
# Metrics-only heuristics: more compiles than warm-up and either this many in all...
METRICS_MIN_COMPILES_ABSOLUTE = 10
# ... or at least this many compiles per step.
METRICS_MIN_COMPILES_PER_STEP = 0.2
# Recompiling on at least this share of post-warm-up steps is an error, not a warning ...
ERROR_RECOMPILE_STEP_SHARE = 0.5
# ... when it happens on at least this many steps (one late compile at a run's last step is a
# one-time cost, whatever share of the steps after it that is).
ERROR_MIN_RECOMPILE_STEPS = 2
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

_ADVICE = {
    "input_shapes": (
        "An input's shape changes between steps. Pad or bucket that dimension to a few fixed "
        "sizes (for a batch dimension: drop_last=True in the DataLoader, or pad the last "
        "batch), or mark it dynamic (torch._dynamo.mark_dynamic) when compiling with "
        "torch.compile(backend='openxla')."
    ),
    "data_dependent": (
        "A shape depends on the data (nonzero, one-argument torch.where, boolean indexing, "
        "masked_select, unique): each new count is a new graph. Keep shapes fixed: multiply by "
        "the mask or use torch.where(mask, x, 0) instead of selecting rows, and reduce with the "
        "mask as a weight."
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
    "baked_value": (
        "torch_xla passes a Python number to the graph as device data, except a value equal to "
        "0 or 1 in the tensor's dtype (after rounding), which it bakes into the graph as a "
        "constant: the step where the number reaches 0 or 1 compiles a new graph. Keep the "
        "number away from 0 and 1 (a floor on a schedule), or pass it as a device tensor."
    ),
    "constant": (
        "A Python number passed to an op (a shift, a size, an index) is baked into the graph as "
        "a constant, so each new value compiles a new graph. Keep it fixed, or pass it as a "
        "device tensor (torch.tensor(value, device=...)) and use an op that takes a tensor."
    ),
    "attribute": (
        "A Python number used as a slice bound or size is baked into the graph, so each new "
        "value compiles a new graph. Index with a device tensor instead (index_select, "
        "torch.gather or narrow with a tensor of positions), slice on the host before "
        "`.to(device)`, or keep the bounds fixed."
    ),
    "sizes": (
        "A size made from a Python number (torch.arange(n), a slice length, a view) changes "
        "between steps while the inputs stay the same: keep it fixed (pad to a maximum length) "
        "or compute it from a fixed-size tensor and a mask."
    ),
    "parameters": (
        "The graph takes a different set of inputs than the graph it replaced: a tensor "
        "created or dropped on some steps only, or two inputs that happen to be the same "
        "value. Keep the same tensors flowing into the step every time."
    ),
    "structure": (
        "The graph's ops change between steps. Look at the line named: a Python `if` on a "
        "tensor value, a Python number that changes every step, or a code path taken only "
        "sometimes. Move the branch into the graph (torch.where) or make the value a tensor."
    ),
}
# Fix texts for causes inside a library, where the user's remedy is a setting of the library.
# transformers' MoE experts (experts_implementation="eager") route tokens with
# torch.where(mask) and index each expert's tokens: examples/realcode/hf_mixtral_moe.py
# measured 31 compiles in 3 steps, and hf_mixtral_batched.py 2 in all with "batched_mm".
_TRANSFORMERS_EXPERTS = (
    " This is transformers' experts loop ({where}): load the model with "
    'experts_implementation="batched_mm", which runs every expert on fixed shapes (measured on '
    'Mixtral: 2 compilations in all instead of new graphs every step), instead of "eager".'
)
# torch.optim's Adam/AdamW compute two Python numbers that reach 1.0 in float32: the decoupled
# weight decay factor (1 - lr * weight_decay), with lr * weight_decay below 2**-25 (about 3e-8),
# and the bias corrections (1 - beta ** step) late in training. examples/realcode/
# hf_bert_cosine_lr.py measured the first: a cosine schedule's last step recompiles, and
# XLA_NO_SPECIAL_SCALARS=1 does not stop it (the value 1.0 then shares a cached device scalar
# with another input instead).
_WEIGHT_DECAY = (
    " Here it is the optimizer's decoupled weight decay `1 - lr * weight_decay` ({where}): at "
    "a tiny learning rate (lr * weight_decay below about 3e-8, which a schedule decaying to 0 "
    "reaches at its end) it is 1.0 in float32. Keep lr * weight_decay at or above 6e-8 until "
    "the last step (a floor on the schedule: a minimum learning rate of 6e-8 / weight_decay), "
    "or end the schedule before it reaches ~0. XLA_NO_SPECIAL_SCALARS=1 does not prevent this "
    "recompilation (measured)."
)
_BIAS_CORRECTION = (
    " Here it is the optimizer's bias correction `1 - beta ** step` ({where}), which is 1.0 in "
    "float32 once beta ** step is below about 3e-8: one recompile late in training, a "
    "one-time cost."
)
_OPTIMIZER = (
    " It is in torch.optim ({where}): the numbers there that reach 1.0 in float32 are AdamW's "
    "decoupled weight decay `1 - lr * weight_decay` at a tiny learning rate (keep lr * "
    "weight_decay at or above 6e-8 until the last step: a floor on the schedule, or end it "
    "before ~0; XLA_NO_SPECIAL_SCALARS=1 does not prevent it, measured) and the bias "
    "corrections `1 - beta ** step` late in training (one recompile, a one-time cost)."
)
_GROWN = (
    "An input is rebuilt by a reassignment in the loop (line {line}) and grows every step, so "
    "every step traces graphs of a new shape and compiles them. Allocate it once at its final "
    "size and write each step's values into it at a position index (a fixed shape, with a mask "
    "over the part filled so far), or keep a static KV cache (transformers' StaticCache)."
)
_SHORT_BATCH = (
    "The loop yields batches whose first dimension changes ({sizes}): the data set's size is "
    "not a multiple of the batch size, so the last batch is short and compiles a graph of its "
    "own (once per shape; again wherever it is traced anew). Pass drop_last=True to the "
    "DataLoader, or pad the last batch to the full size (and mask the padded rows out of the "
    "loss)."
)
_CUT_SITE_NO_GRAPHS = (
    "the line that ran the sync: no graphs were kept to tell the cause (`xlaprof run` keeps them)"
)
_CUT_SITE = "the line that ran the sync: the graphs named no line of yours nearer the cause"


@dataclass
class _Site:
    """The compilations one cut site (the user's line that ran the sync) made."""

    location: Location | None
    events: list[DebugEvent]  # every compilation at the site
    late: list[DebugEvent]  # recompilations: after warm-up, and not a graph first needed late
    explanation: Explanation | None
    first_needed: list[DebugEvent] = field(default_factory=list)  # new graphs compiled late

    @property
    def late_steps(self) -> frozenset[int]:
        return frozenset(e.step for e in self.late if e.step is not None)

    @property
    def rank(self) -> int:
        """How actionable the site's explanation is (lower first, as graph_diff.KINDS)."""
        kind = self.explanation.kind if self.explanation is not None else None
        return KINDS.index(kind) if kind in KINDS else len(KINDS)


def _split_warmup(events: list[DebugEvent]) -> tuple[list[DebugEvent], list[DebugEvent]]:
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


def _origin(site: _Site) -> tuple[Location | None, str | None, int | None]:
    """The user's line that causes the site's recompiles, how it was found, and the loop line
    that regrows the input (when that is the cause)."""
    explanation = site.explanation
    cut = site.location
    if explanation is not None and explanation.kind in ("input_shapes", "data_dependent"):
        change = next((c for c in explanation.inputs if c.data_dependent), explanation.inputs[0])
        found = _input_origin(change, cut)
        if found is not None:
            return found
    elif explanation is not None and explanation.first_difference is not None:
        where = explanation.first_difference.get("location")
        location = _parse_location(where) if isinstance(where, str) else None
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


def _input_origin(
    change: InputChange, cut: Location | None
) -> tuple[Location, str, int | None] | None:
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
    step_frame = _frame_in_loop(frames, cut) or frames[0]
    if change.data_dependent:
        return step_frame, f"your call that runs aten::{change.data_dependent}", None
    made_here = change.op_source == step_frame  # the op that first used it is on this line
    if made_here:
        if cut is not None:
            line = loop_reassignment(step_frame.file, step_frame.line, cut.line)
            if line is not None:
                return (
                    Location(step_frame.file, line),
                    f"reassigned inside the loop (created first at line {step_frame.line})",
                    line,
                )
            if step_frame.file != cut.file:
                # made in a helper (make_batch): the step's call of it is the line to change
                function = enclosing_function(step_frame.file, step_frame.line)
                line = loop_call_of(cut.file, cut.line, function) if function else None
                if line is not None:
                    return (
                        Location(cut.file, line),
                        f"the call in the step that makes the input (created at {step_frame})",
                        None,
                    )
        return step_frame, "where the input was created", None
    bound = argument_origin(step_frame.file, step_frame.line, 0)
    if bound is not None:
        if cut is not None and cut.file == step_frame.file:
            grown = loop_reassignment(step_frame.file, bound, cut.line)
            if grown is not None:
                return (
                    Location(step_frame.file, grown),
                    f"reassigned inside the loop (created first at line {bound}; passed at "
                    f"line {step_frame.line})",
                    grown,
                )
        return (
            Location(step_frame.file, bound),
            f"where the input passed at line {step_frame.line} is bound",
            None,
        )
    return step_frame, "your call that passes the input", None


def _frame_in_loop(frames: tuple[Location, ...], cut: Location | None) -> Location | None:
    """The user frame inside the loop that holds the sync ``cut`` (or that ``cut`` heads)."""
    if cut is None:
        return None
    loops = {enclosing_loop(cut.file, cut.line), cut.line} - {None}
    for frame in frames:
        if frame.file == cut.file and (
            frame.line == cut.line or enclosing_loop(frame.file, frame.line) in loops
        ):
            return frame
    return None


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
    sites = []
    for location, events in timelines.items():
        _warmup, late = _split_warmup(events)
        if not late:
            continue
        compiled = [e for e in events if e.kind == "compilation"]
        site = _judge_late(location, compiled, late, graph_of, dynamic)
        if site is not None:
            sites.append(site)
    return [_group_finding(data, group) for group in _grouped(sites)]


def _judge_late(
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
    keys = Keys()
    recompiles: list[DebugEvent] = []
    first_needed: list[DebugEvent] = []
    diffs = []
    for event in late:
        graph = graph_of.get(id(event))
        graph_diff = None
        if graph is not None and graph.hlo is not None:
            before = most_similar(graph, [g for g in site_graphs if g.order < graph.order], keys)
            if before is not None:
                graph_diff = diff(before, graph, dynamic, keys)
        if graph_diff is not None and not graph_diff.variant:
            first_needed.append(event)
            continue
        recompiles.append(event)
        if graph_diff is not None:
            diffs.append(graph_diff)
    if not recompiles:
        return None
    context = []  # the warm-up graphs' own changes: the first values of what later changes
    if diffs:
        for event in compiled:
            graph = graph_of.get(id(event))
            if event in late or graph is None or graph.hlo is None:
                continue
            before = most_similar(graph, [g for g in site_graphs if g.order < graph.order], keys)
            if before is not None:
                context.append(diff(before, graph, dynamic, keys))
    explanation = merge(diffs, context) if diffs else None
    if explanation is None and len([g for g in site_graphs if g.hlo is not None]) >= 2:
        explanation = explain(site_graphs, dynamic)
    return _Site(location, compiled, recompiles, explanation, first_needed)


def _group_finding(data: AnalysisInput, sites: list[_Site]) -> Finding:
    """One finding for the sites that recompile for one cause, at the line that causes it."""
    primary = min(sites, key=lambda s: (s.rank, -len(s.late)))
    events = [e for s in sites for e in s.events]
    late = [e for s in sites for e in s.late]
    explanation = primary.explanation
    hashes = list(dict.fromkeys(e.graph_hash for e in events if e.graph_hash))
    location, how, grown = _origin(primary)
    evidence: dict[str, object] = {
        "compiles_at_site": len(events),
        "distinct_graphs": len(hashes),
        "recompiles_after_warmup": len(late),
        "graph_hashes": hashes[:_MAX_LISTED],
        "causes": sorted({e.cause for e in events if e.cause}),
        "cut_sites": [str(s.location) for s in sites if s.location is not None],
    }
    first_needed = [e for s in sites for e in s.first_needed]
    if first_needed:
        evidence["new_graphs_first_needed_late"] = len(first_needed)
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
                    "op_source": None if c.op_source is None else str(c.op_source),
                    "source_text": c.source_text,
                    "shapes": [list(s) for s in c.shapes],
                    "varying_dims": {str(k): v for k, v in c.varying_dims.items()},
                    "data_dependent_op": c.data_dependent,
                }
                for c in explanation.inputs[:_MAX_LISTED]
            ]
        if explanation.changes:
            evidence["graph_differences"] = [c.detail() for c in explanation.changes[:_MAX_LISTED]]
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
                for d in explanation.diffs[:_MAX_LISTED]
            ]
    severity = Severity.WARNING
    steps = [e.step for e in events if e.step is not None]
    if steps:
        evidence["compile_steps"] = steps[: _MAX_LISTED * 4]
        late_steps = {e.step for e in late if e.step is not None}
        first_late = min(late_steps) if late_steps else None
        later_steps = len(
            [s for s in data.steps if first_late is not None and s.step >= first_late]
        )
        if (
            later_steps
            and len(late_steps) >= ERROR_MIN_RECOMPILE_STEPS
            and len(late_steps) >= ERROR_RECOMPILE_STEP_SHARE * later_steps
        ):
            severity = Severity.ERROR
    text = source_line(location.file, location.line) if location is not None else None
    if text:
        evidence["source_text"] = text
    batches = _batch_sizes(explanation, text)
    headline = _headline(explanation)
    if batches is not None:
        headline = f"the loop's batches change size ({batches}): a short last batch"
    return Finding(
        kind=Kind.RECOMPILATION,
        severity=severity,
        title=(
            f"Recompiling: {len(events)} compilations of {len(hashes)} different graphs "
            f"({len(late)} after warm-up)" + (f": {headline}" if headline else "")
        ),
        evidence=evidence,
        location=location,
        suggestion=_suggestion(explanation, grown, batches),
    )


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


def _suggestion(
    explanation: Explanation | None, grown: int | None, batches: str | None = None
) -> str:
    """The fix text for the cause the graphs show, with the library's own remedy where known."""
    if explanation is None:
        return SUGGESTION
    text = _ADVICE.get(explanation.kind, SUGGESTION)
    if batches is not None:
        return _SHORT_BATCH.format(sizes=batches)
    if explanation.kind == "data_dependent":
        change = next(c for c in explanation.inputs if c.data_dependent)
        where = change.op_source
        if where is not None and _in_transformers_experts(where):
            text += _TRANSFORMERS_EXPERTS.format(where=_short(where))
    elif explanation.kind == "input_shapes" and grown is not None:
        text = _GROWN.format(line=grown)
    elif explanation.kind == "baked_value" and explanation.first_difference:
        where = _parse_location(str(explanation.first_difference.get("op_source") or ""))
        if where is not None and re.search(r"[/\\]torch[/\\]optim[/\\]", where.file):
            source = source_line(where.file, where.line) or ""
            if "weight_decay" in source:
                text += _WEIGHT_DECAY.format(where=_short(where))
            elif "beta" in source:
                text += _BIAS_CORRECTION.format(where=_short(where))
            else:  # the library's source is not readable here
                text += _OPTIMIZER.format(where=_short(where))
    return text


def _in_transformers_experts(where: Location) -> bool:
    """A line in transformers' mixture-of-experts code (an experts loop)."""
    if not re.search(r"[/\\]transformers[/\\]", where.file):
        return False
    if re.search(r"(moe|mixtral|experts)", where.file, re.IGNORECASE):
        return True
    text = source_line(where.file, where.line) or ""
    owner = enclosing_class(where.file, where.line) or ""
    return "expert" in text.lower() or "expert" in owner.lower()


def _short(where: Location) -> str:
    """``.../site-packages/transformers/models/x.py:85`` -> ``transformers/models/x.py:85``."""
    match = re.search(r"[/\\](?:site|dist)-packages[/\\](.+)$", where.file)
    return f"{match.group(1) if match else where.file}:{where.line}"


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


def _headline(explanation: Explanation | None) -> str | None:
    if explanation is None:
        return None
    kind = explanation.kind
    if kind == "data_dependent":
        change = next(c for c in explanation.inputs if c.data_dependent)
        where = change.op_source or change.source
        return f"data-dependent shape (aten::{change.data_dependent} at {where})"
    if kind == "input_shapes":
        change = explanation.inputs[0]
        dims = ", ".join(
            f"dim {d} takes {' → '.join(map(str, v[:_MAX_VALUES_SHOWN]))}"
            + (" → …" if len(v) > _MAX_VALUES_SHOWN else "")
            for d, v in change.varying_dims.items()
        )
        return f"input {change.parameter} ({change.dtype}) {dims}"
    difference = explanation.first_difference or {}
    before, after = difference.get("before"), difference.get("after")
    where = difference.get("location") or difference.get("op_source")
    at = f" at {where}" if where else ""
    if kind == "baked_value":
        return f"a value passed as device data was baked in as the constant {after}{at}"
    if kind == "constant":
        return f"a constant baked into the graph changes ({before} → {_clip(after)}){at}"
    if kind == "attribute":
        what = "slice bounds" if "slice=" in str(before) else "op attributes"
        return f"{what} baked into the graph change ({before} → {_clip(after)}){at}"
    if kind == "sizes":
        return f"sizes change with the same inputs ({before} → {_clip(after)}){at}"
    if kind == "parameters":
        return f"the graph's inputs differ{at}"
    if kind == "structure":
        return f"the graph's ops differ{at}"
    if kind == "nothing_visible":
        return "no visible change in the graphs"
    return None


_MAX_VALUES_SHOWN = 6


def _clip(value: object, limit: int = 3) -> str:
    """The first few of an ``a → b → c → …`` chain of values."""
    parts = str(value).split(" → ")
    return " → ".join(parts[:limit]) + (" → …" if len(parts) > limit else "")
