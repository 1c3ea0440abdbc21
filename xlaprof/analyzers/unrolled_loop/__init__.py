"""Unrolled loops: a Python loop over N identical layers traced into one graph N times.

Compile time grows with N, faster than linearly in practice; ``scan_layers`` compiles one layer
and loops over it on the device. Nothing in the counters shows this: it is read from the graphs
(``graphs/`` of a run directory).

Detection (``repeats``): the entry computation's instructions (parameters and constants left
out) become a sequence of signatures, and runs of structurally identical blocks are found in
it. A run counts when it has at least ``MIN_REPEATS`` blocks of at least ``MIN_BLOCK_OPS`` ops
covering ``MIN_GRAPH_SHARE`` of the graph, in a graph executed at least ``MIN_EXECUTIONS``
times (when executions are known: a set-up graph run once is not worth a scan). Blocks whose
ops all come from ``torch/optim`` (an optimizer's per-parameter loop) are not layer stacks and
are skipped.

Naming: where the run recorded the live module tree, the stack or time loop whose unit count is
the repeat count names the block (``modules``); else the block's own source lines
(``XLA_HLO_DEBUG`` metadata) give the layer's class, and the user's source the
``nn.ModuleList``/``nn.Sequential`` holding it and the loop. The fix texts are ``advice``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from xlaprof.analyzers.recompilation.growth import find_growth
from xlaprof.analyzers.shared.scan_rewrite import blockers, call_in_words
from xlaprof.analyzers.shared.sourcecode import (
    backward_in_loop,
    bench_factory,
    enclosing_class,
    find_layer_stack,
    host_read_in_loop,
    time_loop_sketch,
)
from xlaprof.analyzers.unrolled_loop import unsynced
from xlaprof.analyzers.unrolled_loop.advice import (
    CAVEATS,
    accumulation_text,
    host_loop_text,
    library_text,
    model_path,
    package_of,
    source_suggestion,
    time_loop_text,
    user_text,
)
from xlaprof.analyzers.unrolled_loop.modules import ModuleMatch, match_modules
from xlaprof.analyzers.unrolled_loop.repeats import EDGE_BLOCKS, Repeat, find_repeats
from xlaprof.findings import Finding, Kind, Location, Severity, bench_command
from xlaprof.model.input import AnalysisInput
from xlaprof.model.sources import SourceFiles
from xlaprof.parse.debug_log import DebugEvent
from xlaprof.parse.frames import is_library_file, user_location
from xlaprof.parse.hlo import HloModule, Instruction
from xlaprof.rundir.reader import link_graphs
from xlaprof.rundir.schema import GraphInfo

__all__ = ["analyze", "find_repeats", "unmeasured"]

MIN_BLOCK_OPS = 8
MIN_GRAPH_SHARE = 0.25
# A graph run fewer times than this is set-up code, not a training step.
MIN_EXECUTIONS = 2
_OPTIMIZER_PATH = "/torch/optim/"
# The runs of one graph worth a finding: each with its first block, largest first.
_Runs = list[tuple[Repeat, list[Instruction]]]


def _ops(module: HloModule) -> list[Instruction]:
    return [i for i in module.instructions if i.opcode not in ("parameter", "constant")]


def _user_lines(block: list[Instruction]) -> Counter[tuple[str, int]]:
    lines: Counter[tuple[str, int]] = Counter()
    for instruction in block:
        file, line = instruction.source_file, instruction.source_line
        if file and line and not is_library_file(file):
            lines[(file, line)] += 1
    return lines


def _optimizer_only(block: list[Instruction]) -> bool:
    files = {i.source_file for i in block if i.source_file}
    return bool(files) and all(_OPTIMIZER_PATH in f for f in files)


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not have looked at ``data`` (no compiled graphs), or None."""
    if any(g.hlo is not None for g in data.graphs):
        return None
    return "needs the compiled graphs (a run made with `xlaprof run --graphs`)"


def never_steps(data: AnalysisInput) -> bool:
    """Whether ``data`` is a run that reached at most one step boundary: its graphs, each run
    once, are the job itself (a sampling loop read at the end), not set-up code before the
    steps; and no module tree was recorded (it is, from the second step on)."""
    return data.run_steps is not None and data.run_steps <= 1 and data.modules is None


def _grown_graphs(data: AnalysisInput) -> set[str]:
    """The graphs of sites whose graphs grow with every read (recompilation's growth): each
    holds the iterations traced so far, which that finding tells; the same loop found again
    in each would be the one cause told once per read."""
    sites: dict[object, list[DebugEvent]] = defaultdict(list)
    for event in data.debug.compilations():
        sites[user_location(event.frames)].append(event)
    graph_of = link_graphs(data.graphs, data.debug.compilations())
    grown: set[str] = set()
    for events in sites.values():
        if find_growth(events, graph_of) is not None:
            grown |= {e.graph_hash for e in events if e.graph_hash}
    return grown


def analyze(data: AnalysisInput) -> list[Finding]:
    link_graphs(data.graphs, data.debug.compilations())
    executions = Counter(e.graph_hash for e in data.debug.executions() if e.graph_hash)
    findings = []
    seen: set[tuple[object, ...]] = set()  # one finding per layer stack
    unstepped = never_steps(data)
    grown = _grown_graphs(data) if unstepped else set()
    for graph in data.graphs:
        if graph.hlo is None or graph.graph_hash in grown:
            continue
        run_once = executions and graph.graph_hash and executions[graph.graph_hash] < MIN_EXECUTIONS
        if run_once and not unstepped:
            continue  # set-up code run once (initializing weights in a loop) costs one compile
        finding = _graph_finding(data.sources, graph, seen, data.script, data.modules, unstepped)
        if finding is not None:
            findings.append(finding)
    return findings


def _graph_finding(
    sources: SourceFiles,
    graph: GraphInfo,
    seen: set[tuple[object, ...]],
    script: str | None = None,
    modules: dict[str, Any] | None = None,
    unstepped: bool = False,
) -> Finding | None:
    assert graph.hlo is not None
    ops = _ops(graph.hlo)
    chosen = _repeated_block(sources, ops, modules, unstepped)
    if chosen is None:
        return None
    primary, block, kept, match = chosen
    partners = [
        r for r, _b in kept if r is not primary and primary.repeats - r.repeats <= EDGE_BLOCKS
    ]
    covered = primary.ops + sum(r.ops for r in partners)
    share = covered / len(ops)
    # One finding per stack (named by the module tree), else per block shape, however many
    # graphs (training, evaluation) unroll it.
    key: tuple[object, ...] = (
        ("stack", match.kind, match.name, match.units)
        if match is not None
        else (primary.repeats, primary.block_ops)
    )
    if share < MIN_GRAPH_SHARE or key in seen:
        return None
    lines = _user_lines(block)
    seen.add(key)
    evidence: dict[str, object] = {
        "graph": graph.module,
        "compiled_at_step": graph.step,
        "repeats": primary.repeats,
        "ops_per_block": primary.block_ops,
        "graph_ops": len(ops),
        "repeated_share": round(share, 3),
        "other_runs": [f"{r.repeats} x {r.block_ops} ops" for r in partners],
        "block_source_lines": [f"{f}:{n}" for (f, n), _ in lines.most_common(6)]
        or [
            f"{f}:{n}"
            for (f, n), _ in Counter(
                (i.source_file, i.source_line) for i in block if i.source_file
            ).most_common(6)
        ],
    }
    copies = _copies(primary, partners, share)
    if match is not None:
        return _module_finding(sources, match, primary, copies, evidence, script)
    if unstepped:  # a loop of the user's that never syncs, named by the ops' stacks
        found = unsynced.finding(sources, block, primary, copies, evidence)
        if found is not None:
            return found
    if not lines:
        seen.discard(key)
        return None
    return _source_finding(sources, ops, lines, primary, copies, evidence, script)


def _copies(primary: Repeat, partners: list[Repeat], share: float) -> str:
    """What the title says was traced: the block's copies, those of the runs beside it (the
    same layers' other ops, as their backward's), and the share of the graph they cover
    together, so the share is of what the title names."""
    runs = [f"{primary.repeats} identical copies of a {primary.block_ops}-op block"]
    runs += [f"{r.repeats} of a {r.block_ops}-op block" for r in partners]
    named = runs[0] if len(runs) == 1 else f"{', '.join(runs[:-1])} and {runs[-1]}"
    return f"{named} ({share:.0%} of the graph)"


def _repeated_block(
    sources: SourceFiles,
    ops: list[Instruction],
    modules: dict[str, Any] | None,
    unstepped: bool = False,
) -> tuple[Repeat, list[Instruction], _Runs, ModuleMatch | None] | None:
    """The graph's main run of identical blocks and its first block, every run kept, and what
    the module tree says the block is; None without a run worth a finding. In a run that never
    stepped, a block all of whose ops come from libraries is named by its ops' stacks."""
    if not ops:
        return None
    runs = find_repeats([i.signature for i in ops])
    kept: _Runs = []
    for run in runs:
        block = ops[run.start : run.start + run.block_ops]
        if run.block_ops < MIN_BLOCK_OPS or _optimizer_only(block):
            continue
        kept.append((run, block))
    if not kept:
        return None
    # The forward run has every layer; backward runs lose a block or two at their edges (the
    # first layer needs no input gradient), so the layer count is the largest repeat count.
    primary, block = max(kept, key=lambda rb: (rb[0].repeats, rb[0].ops))
    files = {i.source_file for i in block if i.source_file}
    match = match_modules(sources, modules, primary.repeats, files)
    if match is None:
        # Without the module tree the block must name itself by the user's own lines.
        with_lines = [(r, b) for r, b in kept if _user_lines(b)]
        if not with_lines and unstepped:
            with_lines = [(r, b) for r, b in kept if unsynced.stack_lines(b)]
        if not with_lines:
            return None
        primary, block = max(with_lines, key=lambda rb: (rb[0].repeats, rb[0].ops))
    return primary, block, kept, match


def _source_finding(
    sources: SourceFiles,
    ops: list[Instruction],
    lines: Counter[tuple[str, int]],
    primary: Repeat,
    copies: str,
    evidence: dict[str, object],
    script: str | None,
) -> Finding:
    """A finding named from the block's source lines and located at the user's loop over the
    layer stack, where the user's source holds one."""
    (block_file, block_line), _ = lines.most_common(1)[0]
    files = list(dict.fromkeys(f for f, _ in lines))
    files += sorted(
        {i.source_file for i in ops if i.source_file and not is_library_file(i.source_file)}
        - set(files)
    )
    # The block's lines may span several of the user's classes (a Block and the RMSNorm it
    # uses): the layer is the one held in a ModuleList/Sequential, else the first in the file.
    classes: Counter[str] = Counter()
    for (file, line), count in lines.items():
        name = enclosing_class(sources, file, line)
        if name is not None:
            classes[name] += count
    first = min(line for f, line in lines if f == block_file)
    layer_class = enclosing_class(sources, block_file, first)
    stack = None
    for name, _count in classes.most_common():
        stack = find_layer_stack(sources, files, name)
        if stack is not None:
            layer_class = name
            break
    if layer_class:
        evidence["layer_class"] = layer_class
    layers_option = f" --layers {stack.attribute}" if stack is not None else ""
    evidence["bench_command"] = bench_command(
        "scan", script, layers_option, factory=bench_factory(sources, script)
    )
    location = Location(block_file, block_line)
    if stack is not None:
        evidence["layer_stack_owner"] = stack.owner_class
        evidence["layer_stack_attribute"] = stack.attribute
        evidence["layer_stack"] = (
            f"self.{stack.attribute} of {stack.owner_class} "
            f"(nn.{stack.container} of {stack.layer_class}, {stack.file}:{stack.defined_line})"
        )
        if stack.loop_line is not None:
            location = Location(
                stack.file, stack.loop_line, "the loop over the layer stack, traced unrolled"
            )
            evidence["loop"] = f"{stack.file}:{stack.loop_line}"
    # Blocks at a stack's edges can differ slightly (the first layer needs no input
    # gradient), so the count is of identical copies found, not the number of layers.
    where = (
        f"self.{stack.attribute} ({stack.layer_class})"
        if stack
        else (layer_class or "a repeated block")
    )
    return Finding(
        kind=Kind.UNROLLED_LOOP,
        severity=Severity.WARNING,
        title=f"Unrolled loop: {where} traced as {copies}",
        evidence=evidence,
        location=location,
        suggestion=source_suggestion(sources, stack, primary.repeats),
    )


def _module_finding(
    sources: SourceFiles,
    match: ModuleMatch,
    primary: Repeat,
    copies: str,
    evidence: dict[str, object],
    script: str | None,
) -> Finding:
    """A finding named and located from the live module tree (capture/modules.py)."""
    evidence["module_source"] = "live module tree (modules.json)"
    if match.location is not None:
        evidence["loop"] = str(match.location)
    if match.kind == "time":
        return _time_loop_finding(sources, match, primary, copies, evidence)
    unit = ", ".join(match.unit_classes)
    owned = match.attribute is not None and match.owner_class is not None
    path = model_path(match.name)
    name = _stack_name(match, path, owned)
    single = len(match.unit_classes) == 1
    stack_text = f"nn.{match.container} of {unit if single else f'({unit})'} x {match.units}"
    if single:
        evidence["layer_class"] = unit
    evidence["layer_stack"] = (
        f"{name} of {match.owner_class} ({stack_text})" if owned else f"{name} ({stack_text})"
    )
    if match.signature is not None:
        evidence["layer_call"] = call_in_words(match.signature)
    scannable = (
        single
        and (owned or match.in_library)
        and not (match.signature is not None and blockers(match.signature))
    )
    if scannable and path:
        evidence["layer_stack_owner"] = match.owner_class
        evidence["layer_stack_attribute"] = match.attribute
        evidence["bench_command"] = bench_command(
            "scan", script, f" --layers {path}", factory=bench_factory(sources, script)
        )
    if match.in_library:
        how = library_text(match, name, unit, evidence)
        title_where = f" inside {package_of(match.applied_by)}"
    else:
        how = user_text(sources, match, name, unit, single and owned)
        title_where = ""
    return Finding(
        kind=Kind.UNROLLED_LOOP,
        severity=Severity.WARNING,
        title=f"Unrolled loop{title_where}: {name} ({stack_text}) traced as {copies}",
        evidence=evidence,
        location=match.location,
        suggestion=how + CAVEATS.format(repeats=match.units),  # the stack's, as titled
    )


def _stack_name(match: ModuleMatch, path: str | None, owned: bool) -> str:
    """How the finding names a stack: from the model where a library applies it, else as its
    owner holds it (``self.blocks``), else by its path in the tree."""
    if match.in_library:
        return f"model.{path}" if path else "the model"
    if owned:
        return f"self.{match.attribute}"
    if match.name in (None, "<root>"):
        return "the model"
    return str(match.name)


def _time_loop_finding(
    sources: SourceFiles,
    match: ModuleMatch,
    primary: Repeat,
    copies: str,
    evidence: dict[str, object],
) -> Finding:
    """One module called again and again in a Python loop: run the loop with ``scan``."""
    unit = ", ".join(match.unit_classes)
    evidence["repeated_module"] = f"{match.name} ({unit}), called {match.units} times a step"
    call = match.call
    loop = match.location
    backward = None if loop is None else backward_in_loop(sources, loop.file, loop.line)
    read = None if loop is None else host_read_in_loop(sources, loop.file, loop.line)
    if loop is not None and backward is not None:
        evidence["loop_calls_backward"] = f"{loop.file}:{backward}"
        suggestion = accumulation_text(str(loop), backward, match.units)
    elif loop is not None and read is not None:
        evidence["loop_reads_on_host"] = f"{loop.file}:{read}"
        suggestion = host_loop_text(str(loop), read, match.units)
    else:
        sketch = time_loop_sketch(sources, call.file, call.line) if call is not None else None
        if sketch is not None:
            evidence["scan_sketch"] = sketch
        suggestion = time_loop_text(match, sketch)
    return Finding(
        kind=Kind.UNROLLED_LOOP,
        severity=Severity.WARNING,
        title=(
            f"Unrolled {'gradient-accumulation' if backward is not None else 'time'} loop: "
            f"{'the model' if match.name in (None, '<root>') else match.name} ({unit}) "
            f"applied {match.units} times in a Python loop, traced as {copies}"
        ),
        evidence=evidence,
        location=match.location,
        suggestion=suggestion,
    )
