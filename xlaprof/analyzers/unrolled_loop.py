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

Naming: the block's own source lines (``XLA_HLO_DEBUG`` metadata) give the layer's class; the
user's source then gives the ``nn.ModuleList``/``nn.Sequential`` holding it and the loop.

Longer than the ~350 lines a module here aims for: finding the repeated block, naming it from
the module tree or the source, and telling a layer stack from a time loop are one analyzer.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from xlaprof.analyzers.shared.scan_rewrite import blockers, call_in_words, carry_rewrite, simple
from xlaprof.analyzers.shared.sourcecode import (
    bench_factory,
    enclosing_class,
    enclosing_loop,
    find_layer_stack,
    loop_call,
    time_loop_sketch,
)
from xlaprof.findings import Finding, Kind, Location, Severity, bench_command
from xlaprof.model.input import AnalysisInput
from xlaprof.parse.frames import is_library_file
from xlaprof.parse.hlo import HloModule, Instruction
from xlaprof.rundir.reader import link_graphs
from xlaprof.rundir.schema import GraphInfo

MIN_REPEATS = 4
MIN_BLOCK_OPS = 8
MIN_GRAPH_SHARE = 0.25
# A graph run fewer times than this is set-up code, not a training step.
MIN_EXECUTIONS = 2
MAX_RUNS_PER_GRAPH = 4
_OPTIMIZER_PATH = "/torch/optim/"
# Runs with this many fewer repeats than the largest one are the same layers (backward edges).
_EDGE_BLOCKS = 2


@dataclass(frozen=True)
class Repeat:
    """A run of ``repeats`` identical blocks of ``block_ops`` ops starting at op ``start``."""

    start: int
    block_ops: int
    repeats: int

    @property
    def ops(self) -> int:
        return self.block_ops * self.repeats


def find_repeats(
    tokens: list[str], min_repeats: int = MIN_REPEATS, max_runs: int = MAX_RUNS_PER_GRAPH
) -> list[Repeat]:
    """Non-overlapping runs of identical blocks in ``tokens``, largest first."""
    import numpy as np

    ids = {token: number for number, token in enumerate(dict.fromkeys(tokens))}
    sequence = np.fromiter((ids[t] for t in tokens), dtype=np.int64, count=len(tokens))
    total = len(sequence)
    free = np.ones(total, dtype=bool)
    runs: list[Repeat] = []
    for _ in range(max_runs):
        best: Repeat | None = None
        for period in range(1, total // min_repeats + 1):
            same = (sequence[:-period] == sequence[period:]) & free[:-period] & free[period:]
            if not same.any():
                continue
            edges = np.diff(np.concatenate(([0], same.astype(np.int8), [0])))
            starts = np.flatnonzero(edges == 1)
            lengths = np.flatnonzero(edges == -1) - starts
            longest = int(lengths.argmax())
            repeats = (int(lengths[longest]) + period) // period
            if repeats < min_repeats:
                continue
            candidate = Repeat(int(starts[longest]), period, repeats)
            if best is None or candidate.ops > best.ops:
                best = candidate
        if best is None:
            break
        runs.append(best)
        free[best.start : best.start + best.ops] = False
    return runs


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
    seen: set[tuple[object, ...]] = set()  # one finding per layer stack
    for graph in data.graphs:
        if graph.hlo is None:
            continue
        if executions and graph.graph_hash and executions[graph.graph_hash] < MIN_EXECUTIONS:
            continue  # set-up code run once (initializing weights in a loop) costs one compile
        finding = _graph_finding(graph, seen, data.script, data.modules)
        if finding is not None:
            findings.append(finding)
    return findings


@dataclass(frozen=True)
class ModuleMatch:
    """What the live module tree says a repeated block is.

    ``kind`` is ``"stack"`` (a ModuleList/Sequential whose ``units`` repeating units are
    identical in class and parameter shapes) or ``"time"`` (one module, the same parameters,
    called ``units`` times in one step).
    """

    kind: str
    units: int
    unit_classes: tuple[str, ...]
    container: str | None  # ModuleList / Sequential, for stacks
    owner_class: str | None  # the module holding the container, if any
    attribute: str | None  # its attribute name (self.<attribute>)
    name: str | None  # the module path in the tree
    location: Location | None  # the loop (or the call of the stack)
    call: Location | None  # the user line calling the repeated module (time loops)
    signature: dict[str, Any] | None = None  # how each unit is called (modules.json "call")
    applied_by: dict[str, Any] | None = None  # the code applying the stack (modules.json)
    in_library: bool = False  # that code is a library's: the user's line only calls the model


def _units(children: list[tuple[str, str]]) -> tuple[int, int, int]:
    """The longest run of identical units among a container's children: (start, period, count).

    ``Sequential(Linear, GELU, Linear, GELU, ..., Linear)`` has 16 units of period 2 starting
    at 0 and a head left over; a ModuleList of 12 ``Block`` has 12 units of period 1.
    """
    best, covered = (0, len(children), 1), 0
    for period in range(1, len(children) // 2 + 1):
        run = 0
        for index in range(len(children) - period):
            run = run + 1 if children[index] == children[index + period] else 0
            count = (run + period) // period
            if count >= 2 and count * period > covered:
                best, covered = (index + 1 - run, period, count), count * period
    return best


def _site(entry: dict[str, Any], direct: bool) -> Location | None:
    for site in entry.get("sites") or entry.get("child_sites") or []:
        if bool(site.get("direct")) == direct:
            file, _, line = str(site.get("where", "")).rpartition(":")
            if file and line.isdigit():
                return Location(file, int(line))
    return None


def _loop_line(call: Location, applied: dict[str, Any] | None) -> int | None:
    """The loop around the user's call of each layer: from the source where it is readable,
    else as the capture read it (``applied_by.loop_line``) for that same call."""
    loop = enclosing_loop(call.file, call.line)
    if loop is None and applied is not None and applied.get("file") == call.file:
        recorded = applied.get("loop_line")
        loop = recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else None
    return loop


def _match_modules(
    modules: dict[str, Any] | None, repeats: int, block_files: set[str]
) -> ModuleMatch | None:
    """The stack or time loop whose unit count is the block's repeat count (edges allowed)."""
    if not modules:
        return None
    candidates: list[tuple[tuple[int, int, int], ModuleMatch]] = []
    for stack in modules.get("stacks") or []:
        children = [(c.get("class", ""), c.get("params", "")) for c in stack.get("children", [])]
        start, period, units = _units(children)
        if units < MIN_REPEATS or abs(units - repeats) > _EDGE_BLOCKS:
            continue
        unit = children[start : start + period]
        if not any(params for _cls, params in unit):
            continue  # no parameters: nothing scan_layers could stack
        unit_files = {c.get("file") for c in stack.get("children", [])[start : start + period]}
        applied = stack.get("applied_by") if isinstance(stack.get("applied_by"), dict) else None
        child_call = _site({"sites": stack.get("child_sites")}, direct=True)
        in_library = False
        if child_call is not None:
            location = Location(child_call.file, _loop_line(child_call, applied) or child_call.line)
        else:
            location = _site(stack, direct=True)
        if location is None:
            # The stack is applied inside a library (transformers' LlamaModel, timm's
            # VisionTransformer): the user's line is the call that led there.
            location = _site({"sites": stack.get("child_sites")}, direct=False) or _site(
                stack, direct=False
            )
            in_library = applied is None or bool(applied.get("library", True))
        match = ModuleMatch(
            kind="stack",
            units=units,
            unit_classes=tuple(cls for cls, _params in unit),
            container=stack.get("class"),
            owner_class=stack.get("owner_class"),
            attribute=stack.get("attribute"),
            name=stack.get("name"),
            location=location,
            call=child_call,
            signature=stack.get("call") if isinstance(stack.get("call"), dict) else None,
            applied_by=applied,
            in_library=in_library,
        )
        score = (abs(units - repeats), 0 if unit_files & block_files else 1, 0)
        candidates.append((score, match))
    for entry in modules.get("repeated") or []:
        calls = int(entry.get("calls") or 0)
        if calls < MIN_REPEATS or abs(calls - repeats) > _EDGE_BLOCKS:
            continue
        call = _site(entry, direct=True)
        if call is None:
            continue
        loop = enclosing_loop(call.file, call.line)
        match = ModuleMatch(
            kind="time",
            units=calls,
            unit_classes=(str(entry.get("class")),),
            container=None,
            owner_class=None,
            attribute=None,
            name=entry.get("name"),
            location=Location(call.file, loop) if loop is not None else call,
            call=call,
        )
        score = (abs(calls - repeats), 0 if entry.get("file") in block_files else 1, 1)
        candidates.append((score, match))
    if not candidates:
        return None
    return min(candidates, key=lambda c: c[0])[1]


def _graph_finding(
    graph: GraphInfo,
    seen: set[tuple[object, ...]],
    script: str | None = None,
    modules: dict[str, Any] | None = None,
) -> Finding | None:
    assert graph.hlo is not None
    ops = _ops(graph.hlo)
    if not ops:
        return None
    runs = find_repeats([i.signature for i in ops])
    kept = []
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
    match = _match_modules(
        modules, primary.repeats, {i.source_file for i in block if i.source_file}
    )
    if match is None:
        # Without the module tree the block must name itself by the user's own lines.
        with_lines = [(r, b) for r, b in kept if _user_lines(b)]
        if not with_lines:
            return None
        primary, block = max(with_lines, key=lambda rb: (rb[0].repeats, rb[0].ops))
    partners = [
        r for r, _b in kept if r is not primary and primary.repeats - r.repeats <= _EDGE_BLOCKS
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
    if match is not None:
        return _module_finding(match, primary, share, evidence, script)
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
        name = enclosing_class(file, line)
        if name is not None:
            classes[name] += count
    layer_class = enclosing_class(block_file, min(line for f, line in lines if f == block_file))
    stack = None
    for name, _count in classes.most_common():
        stack = find_layer_stack(files, name)
        if stack is not None:
            layer_class = name
            break
    if layer_class:
        evidence["layer_class"] = layer_class
    layers_option = f" --layers {stack.attribute}" if stack is not None else ""
    evidence["bench_command"] = bench_command(
        "scan", script, layers_option, factory=bench_factory(script)
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


def _module_finding(
    match: ModuleMatch,
    primary: Repeat,
    share: float,
    evidence: dict[str, object],
    script: str | None,
) -> Finding:
    """A finding named and located from the live module tree (capture/modules.py)."""
    unit = ", ".join(match.unit_classes)
    evidence["module_source"] = "live module tree (modules.json)"
    if match.location is not None:
        evidence["loop"] = str(match.location)
    if match.kind == "time":
        evidence["repeated_module"] = f"{match.name} ({unit}), called {match.units} times a step"
        sketch = (
            time_loop_sketch(match.call.file, match.call.line) if match.call is not None else None
        )
        if sketch is not None:
            evidence["scan_sketch"] = sketch
        title = (
            f"Unrolled time loop: {match.name} ({unit}) applied {match.units} times in a Python "
            f"loop, traced as {primary.repeats} identical copies of a {primary.block_ops}-op "
            f"block ({share:.0%} of the graph)"
        )
        suggestion = (
            "Run the loop on the device with torch_xla.experimental.scan.scan(fn, init, xs): "
            "fn(carry, x_t) -> (carry, y_t) is traced and compiled once, xs are sliced along "
            "dim 0."
            + (f" A sketch from your loop:\n{sketch}\n" if sketch else " ")
            + f"XLA then compiles one step of the loop instead of {match.units}. fn must be "
            "traceable by AOTAutograd (no Python branches on tensor values, no .item()) and "
            "may not close over tensors, so the module's parameters travel in the carry "
            "(torch.func.functional_call); measure compile time and step time before and after."
        )
        return Finding(
            kind=Kind.UNROLLED_LOOP,
            severity=Severity.WARNING,
            title=title,
            evidence=evidence,
            location=match.location,
            suggestion=suggestion,
        )
    owned = match.attribute is not None and match.owner_class is not None
    path = _model_path(match.name)
    if match.in_library:
        name = f"model.{path}" if path else "the model"
    elif owned:
        name = f"self.{match.attribute}"
    elif match.name in (None, "<root>"):
        name = "the model"
    else:
        name = match.name
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
            "scan", script, f" --layers {path}", factory=bench_factory(script)
        )
    if match.in_library:
        how = _library_text(match, name, unit, evidence)
        title_where = f" inside {_package(match.applied_by)}"
    else:
        how = _user_text(match, name, unit, single and owned)
        title_where = ""
    return Finding(
        kind=Kind.UNROLLED_LOOP,
        severity=Severity.WARNING,
        title=(
            f"Unrolled loop{title_where}: {name} ({stack_text}) traced as {primary.repeats} "
            f"identical copies of a {primary.block_ops}-op block ({share:.0%} of the graph)"
        ),
        evidence=evidence,
        location=match.location,
        suggestion=how + _CAVEATS.format(repeats=primary.repeats),
    )


def _model_path(name: str | None) -> str | None:
    """The stack's attribute path from the model the user calls (``model.layers``)."""
    if not name or name == "<root>":
        return None
    return re.sub(r"^<root\d+>\.?", "", name) or None


def _package(applied: dict[str, Any] | None) -> str:
    """The library a stack's loop lives in: ``transformers``, ``timm`` (else "a library")."""
    if applied is None:
        return "a library"
    module = str(applied.get("module") or "")
    if module and module != "__main__":
        return module.split(".")[0]
    file = str(applied.get("file") or "")
    inside = re.search(r"(?:site|dist)-packages/([^/]+)", file)
    return inside.group(1) if inside else "a library"


def _short_file(file: str) -> str:
    """A library file from its package folder on (``timm/models/vision_transformer.py``)."""
    inside = re.search(r"(?:site|dist)-packages/(.+)$", file)
    return inside.group(1) if inside else file


def _user_text(match: ModuleMatch, name: str, unit: str, scannable: bool) -> str:
    """How to scan a stack the user's own code applies, following how its layers are called."""
    where = match.location
    if not scannable:
        return (
            f"Group each repeating unit ({unit}) into one nn.Module, hold the {match.units} "
            "units in an nn.ModuleList and run them with "
            "torch_xla.experimental.scan_layers.scan_layers(layers, x) instead of calling the "
            f"stack at {where}.\n"
        )
    signature = match.signature
    loop = match.location.line if match.location is not None else None
    source = loop_call(match.location.file, loop) if match.location and loop else None
    if signature is None or simple(signature):
        state = source.args[0] if source is not None and source.args else "x"
        return (
            f"Replace the loop at {where} with:\n"
            "    from torch_xla.experimental.scan_layers import scan_layers\n"
            f"    {state} = scan_layers({name}, {state})   # the loop's input and output\n"
        )
    rewrite = carry_rewrite(signature, source, name, unit, match.owner_class, loop)
    words = call_in_words(signature)
    if rewrite is None:
        problems = blockers(signature)
        why = (
            "; ".join(problems)
            if problems
            else ("an integer tensor or a value computed in the loop is passed to each layer")
        )
        return (
            f"Here {words}: scan_layers(layers, x) passes one carry from layer to layer and "
            f"cannot take this call as it stands ({why}). Pass only tensors (the state first, "
            "the rest unchanged) and return them all, then run the layers with "
            "torch_xla.experimental.scan_layers.scan_layers; `xlaprof bench scan` shows "
            "whether it applies.\n"
        )
    code, dropped = rewrite
    extras = (
        f"Each layer's other outputs ({', '.join(dropped)}) are dropped: scan keeps only the "
        "carry, so only the last layer's state comes out. "
        if dropped
        else ""
    )
    return (
        f"Here {words}, and scan_layers(layers, carry) calls layer(*carry) and needs the whole "
        f"carry back, so `{name}` cannot be scanned as it stands: wrap each layer to carry its "
        f"other arguments unchanged.\n{code}{extras}"
    )


def _library_text(match: ModuleMatch, name: str, unit: str, evidence: dict[str, object]) -> str:
    """The loop is a library's: say whose and where, and what the user can do from their code."""
    applied = match.applied_by or {}
    package = _package(applied)
    file = str(applied.get("file") or "")
    line = applied.get("line")
    loop_line = applied.get("loop_line") or line
    function = applied.get("function") or "its forward"
    loop_at = f"{_short_file(file)}:{loop_line}" if file and loop_line else "its own code"
    evidence["stack_in_library"] = f"{package}: {function} ({loop_at})"
    if file and loop_line:
        evidence["loop"] = f"{file}:{loop_line}"
    whose = f"{package}'" if package.endswith("s") else f"{package}'s"
    is_call = match.container == "Sequential"
    where = "calls the stack" if is_call else "loops over the layers"
    said = (
        f"The loop over these {match.units} {unit} is {whose}, not yours: {function} "
        f"{where} at {loop_at}, and your line {match.location} only calls the model, so there "
        "is no loop of yours to replace. "
    )
    signature = match.signature or {}
    problems = blockers(signature) if signature else []
    if is_call and signature and simple(signature):
        return said + (
            f"Its layers take one tensor and return one, and {package} calls the stack as a "
            "whole, so you can swap it on your model object, without changing the library:\n"
            "    from torch import nn\n"
            "    from torch_xla.experimental.scan_layers import scan_layers\n\n"
            "    class ScannedStack(nn.Module):\n"
            "        def __init__(self, layers):\n"
            "            super().__init__()\n"
            "            self.layers = nn.ModuleList(layers)\n\n"
            "        def forward(self, x):\n"
            "            return scan_layers(self.layers, x)\n\n"
            f"    {name} = ScannedStack({name})   # after building the model, before the "
            "optimizer\n"
            f"Its state-dict keys gain `.layers` ({name.removeprefix('model.')}.0. becomes "
            f"{name.removeprefix('model.')}.layers.0.): load checkpoints before the swap. "
            f"Code of {whose} that iterates or indexes the stack (feature extraction, "
            "gradient checkpointing) needs the original.\n"
        )
    words = call_in_words(signature) if signature else "the layers' call was not recorded"
    blocked = (
        f" Of that, {'; '.join(problems)}: scan cannot carry it, so set it aside first."
        if problems
        else ""
    )
    return said + (
        f"What you can do: leave it (the unrolled graph compiles once per input shape and is "
        "reused; the persistent compilation cache, torch_xla.runtime.initialize_cache(DIR), "
        f"keeps it across runs), or override {function} in a subclass of {match.owner_class} "
        "so that it runs the layers with torch_xla.experimental.scan_layers.scan_layers, each "
        f"wrapped to take and return the tensors {package} passes it: {words}.{blocked} "
        f"`xlaprof bench scan` applies that wrapping to a live model (--layers "
        f"{_model_path(match.name) or 'PATH'}) and measures it, without editing {package}.\n"
    )


_CAVEATS = (
    "XLA then compiles one layer instead of {repeats}. Caveats (torch_xla docs): the "
    "layers must be homogeneous (same structure, parameter shapes and computation); no "
    "custom Pallas kernels inside them; pass is_layer_pure=True when each layer is a pure "
    "function of its inputs and parameters, so the layer is traced once and cached. "
    "Measure before and after on your model (`xlaprof bench scan`, as the evidence says): on "
    "some backends the scanned step runs slower even as compilation gets faster."
)


def _suggestion(stack, repeats: int) -> str:  # type: ignore[no-untyped-def]
    """The fix where only the source names the stack (no module tree): the loop's own call
    decides between ``x = scan_layers(...)`` and carrying its other arguments."""
    source = (
        loop_call(stack.file, stack.loop_line)
        if stack is not None and stack.loop_line is not None
        else None
    )
    if stack is not None and stack.loop_line is not None:
        target = f"self.{stack.attribute}"
        where = f"In {stack.owner_class}.{stack.owner_method}, replace the loop at "
        where += f"{stack.file}:{stack.loop_line}"
        plain = source is None or (
            len(source.args) == 1 and not source.keywords and len(source.targets) <= 1
        )
        if plain:
            state = source.args[0] if source is not None else "x"
            how = (
                f"{where} with:\n"
                "    from torch_xla.experimental.scan_layers import scan_layers\n"
                f"    {state} = scan_layers({target}, {state})   # the loop's input and output\n"
            )
        else:
            how = (
                f"{where}: its layers are called with more than the state or return a tuple "
                f"(line {source.line}), and scan_layers(layers, carry) calls layer(*carry) and "
                "needs the whole carry back. Wrap each layer in a module whose forward takes "
                "the tensors it is passed, calls the layer, and returns its new state with the "
                "other tensors unchanged; then run scan_layers over the wrappers with that "
                "tuple as the carry (other outputs of each layer are dropped).\n"
            )
    else:
        how = (
            "Run the repeated layers with torch_xla.experimental.scan_layers.scan_layers(layers, "
            "x), or a non-module loop with torch_xla.experimental.scan.scan(fn, init, xs).\n"
        )
    return how + _CAVEATS.format(repeats=repeats)
