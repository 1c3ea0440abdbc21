"""Unrolled loops: a Python loop over N identical layers traced into one graph N times.

Compile time grows with N, faster than linearly in practice; ``scan_layers`` compiles one layer
and loops over it on the device. Nothing in the counters shows this: it is read from the graphs
(``graphs/`` of a run directory).

Detection: the entry computation's instructions (parameters and constants left out) become a
sequence of signatures (opcode and result shape). A run of structurally identical blocks is a
stretch where the sequence repeats with period L: for each L, positions where token i equals
token i+L are compared in one numpy pass and the longest stretch gives the repeat count. The
smallest period with the largest coverage wins; the stretch is masked and the search repeats, so
forward and backward runs in one graph are both found. A run counts when it has at least
``MIN_REPEATS`` blocks of at least ``MIN_BLOCK_OPS`` ops covering ``MIN_GRAPH_SHARE`` of the
graph, in a graph executed at least ``MIN_EXECUTIONS`` times (when executions are known: a
set-up graph run once is not worth a scan). Blocks whose ops all come from ``torch/optim``
(an optimizer's per-parameter loop) are not layer stacks and are skipped.

Naming: where the run recorded the live module tree, it names the stack or time loop whose
unit count is the repeat count (``modules``); else the block's own source lines
(``XLA_HLO_DEBUG`` metadata) give the layer's class, and the user's source the
``nn.ModuleList``/``nn.Sequential`` holding it and the loop. Finding runs is ``repeats``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from xlaprof.analyzers.shared.sourcecode import LayerStack, enclosing_class, find_layer_stack
from xlaprof.analyzers.unrolled_loop.modules import match_modules, module_finding
from xlaprof.analyzers.unrolled_loop.repeats import EDGE_BLOCKS, Repeat, find_repeats
from xlaprof.findings import Finding, Kind, Location, Severity, bench_command
from xlaprof.model.input import AnalysisInput
from xlaprof.parse.frames import is_library_file
from xlaprof.parse.hlo import HloModule, Instruction
from xlaprof.rundir.reader import link_graphs
from xlaprof.rundir.schema import GraphInfo

__all__ = ["analyze", "find_repeats", "unmeasured"]

MIN_BLOCK_OPS = 8
MIN_GRAPH_SHARE = 0.25
# A graph run fewer times than this is set-up code, not a training step.
MIN_EXECUTIONS = 2
_OPTIMIZER_PATH = "/torch/optim/"


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


def analyze(data: AnalysisInput) -> list[Finding]:
    link_graphs(data.graphs, data.debug.compilations())
    executions = Counter(e.graph_hash for e in data.debug.executions() if e.graph_hash)
    findings = []
    seen: set[tuple[int, int]] = set()  # (repeats, block ops): one finding per layer stack
    for graph in data.graphs:
        if graph.hlo is None:
            continue
        if executions and graph.graph_hash and executions[graph.graph_hash] < MIN_EXECUTIONS:
            continue  # set-up code run once (initializing weights in a loop) costs one compile
        finding = _graph_finding(graph, seen, data.script, data.modules)
        if finding is not None:
            findings.append(finding)
    return findings


def _graph_finding(
    graph: GraphInfo,
    seen: set[tuple[int, int]],
    script: str | None = None,
    modules: dict[str, Any] | None = None,
) -> Finding | None:
    assert graph.hlo is not None
    ops = _ops(graph.hlo)
    kept = _layer_runs(ops)
    if not kept:
        return None
    # The forward run has every layer; backward runs lose a block or two at their edges (the
    # first layer needs no input gradient), so the layer count is the largest repeat count.
    primary, block = max(kept, key=lambda rb: (rb[0].repeats, rb[0].ops))
    match = match_modules(modules, primary.repeats, {i.source_file for i in block if i.source_file})
    if match is None:
        # Without the module tree the block must name itself by the user's own lines.
        with_lines = [(r, b) for r, b in kept if _user_lines(b)]
        if not with_lines:
            return None
        primary, block = max(with_lines, key=lambda rb: (rb[0].repeats, rb[0].ops))
    partners = [
        r for r, _b in kept if r is not primary and primary.repeats - r.repeats <= EDGE_BLOCKS
    ]
    covered = primary.ops + sum(r.ops for r in partners)
    share = covered / len(ops)
    if share < MIN_GRAPH_SHARE or (primary.repeats, primary.block_ops) in seen:
        return None
    lines = _user_lines(block)
    seen.add((primary.repeats, primary.block_ops))
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
    if match is not None:
        return module_finding(match, primary, share, evidence, script)
    return _source_finding(ops, lines, primary, share, evidence, script)


def _layer_runs(ops: list[Instruction]) -> list[tuple[Repeat, list[Instruction]]]:
    """The runs of identical blocks in ``ops`` that could be layers, each with its first
    block: large enough, and not an optimizer's per-parameter loop."""
    if not ops:
        return []
    kept = []
    for run in find_repeats([i.signature for i in ops]):
        block = ops[run.start : run.start + run.block_ops]
        if run.block_ops >= MIN_BLOCK_OPS and not _optimizer_only(block):
            kept.append((run, block))
    return kept


def _source_finding(
    ops: list[Instruction],
    lines: Counter[tuple[str, int]],
    primary: Repeat,
    share: float,
    evidence: dict[str, object],
    script: str | None,
) -> Finding:
    """A finding named and located from the block's source lines (``lines``: the user's own)
    and the layer stack that the user's source holds."""
    (block_file, block_line), _ = lines.most_common(1)[0]
    layer_class = enclosing_class(block_file, min(line for f, line in lines if f == block_file))
    files = list(dict.fromkeys(f for f, _ in lines))
    files += sorted(
        {i.source_file for i in ops if i.source_file and not is_library_file(i.source_file)}
        - set(files)
    )
    stack = find_layer_stack(files, layer_class) if layer_class else None
    if layer_class:
        evidence["layer_class"] = layer_class
    layers_option = f" --layers {stack.attribute}" if stack is not None else ""
    evidence["bench_command"] = bench_command("scan", script, layers_option)
    location = Location(block_file, block_line)
    if stack is not None:
        evidence["layer_stack_owner"] = stack.owner_class
        evidence["layer_stack_attribute"] = stack.attribute
        evidence["layer_stack"] = (
            f"self.{stack.attribute} of {stack.owner_class} "
            f"(nn.{stack.container} of {stack.layer_class}, {stack.file}:{stack.defined_line})"
        )
        if stack.loop_line is not None:
            location = Location(stack.file, stack.loop_line)
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
        title=(
            f"Unrolled loop: {where} traced as {primary.repeats} identical copies of a "
            f"{primary.block_ops}-op block ({share:.0%} of the graph)"
        ),
        evidence=evidence,
        location=location,
        suggestion=_suggestion(stack, primary.repeats),
    )


def _suggestion(stack: LayerStack | None, repeats: int) -> str:
    if stack is not None and stack.loop_line is not None:
        target = f"self.{stack.attribute}"
        how = (
            f"In {stack.owner_class}.{stack.owner_method}, replace the loop at "
            f"{stack.file}:{stack.loop_line} with:\n"
            "    from torch_xla.experimental.scan_layers import scan_layers\n"
            f"    x = scan_layers({target}, x)   # x: the loop's input and output\n"
        )
    else:
        how = (
            "Run the repeated layers with torch_xla.experimental.scan_layers.scan_layers(layers, "
            "x), or a non-module loop with torch_xla.experimental.scan.scan(fn, init, xs).\n"
        )
    return (
        how + f"XLA then compiles one layer instead of {repeats}. Caveats (torch_xla docs): the "
        "layers must be homogeneous (same structure, parameter shapes and computation); no "
        "custom Pallas kernels inside them; pass is_layer_pure=True when each layer is a pure "
        "function of its inputs and parameters, so the layer is traced once and cached. "
        "Measure before and after on your model with the bench command in the evidence "
        "(FACTORY: a function returning (model, batch)): on some backends the scanned step runs "
        "slower even as compilation gets faster."
    )
