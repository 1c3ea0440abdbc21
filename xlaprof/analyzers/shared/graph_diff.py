"""What changed between two graphs one site compiled: the recompilation root cause.

A late compile is compared with the *most similar earlier graph of the same site* (the one whose
ops align best, opcode and dtype, in trace order), never with whatever came just before it: the
graph it replaced is the one that tells what changed. The two are aligned op by op and every
difference is named, each with the user's source line:

* an input whose shape changed (the dimensions that vary, the values seen in order), and
  whether an op with a data-dependent output shape made it (``nonzero``, one-argument
  ``torch.where``, boolean indexing, ``masked_select``, ``unique``: seen in the fallback
  tracker at the op's own frame, or in the line's text);
* a graph input that became a constant: torch_xla passes a Python number to the graph as device
  data, except one equal to 0 or 1 in the tensor's dtype, which it bakes in (``1 - lr * wd``
  rounding to 1.0 in float32);
* a constant whose value differs (a Python number baked into the graph);
* an op whose attributes differ with the same shapes: slice bounds, an iota's or pad's size,
  dimensions, baked in from a Python number (``source[i : i + n]``);
* shapes that change with no input changing (a size made from a Python number);
* parameters added or gone, ops added or gone.

Each op's line is its user frame from the HloProto's stack (``parse.hlo.with_stacks``), else
its own ``source_file``/``source_line`` when that is the user's code, else the same for the
aligned op of the other graph: a graph compiled after IR debug was switched off in steady
state (``capture/graphs.py::SourceFrames``) has no lines of its own, the graph it replaced has.
"""

from __future__ import annotations

import ast
import difflib
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from xlaprof.analyzers.shared.sourcecode import source_line
from xlaprof.findings import Location
from xlaprof.model.sources import SourceFiles
from xlaprof.parse.frames import is_library_file
from xlaprof.parse.hlo import HloModule, Instruction
from xlaprof.rundir.schema import GraphInfo

DYNAMIC_SHAPE_OPS = ("nonzero", "masked_select", "unique", "unique2", "unique_consecutive")
# A late graph is a variant of an earlier one (the same computation with something baked in or
# a shape changed) when at least this share of their ops align (difflib's ratio over opcode and
# dtype, parameters included). A logging or evaluation graph first needed late aligns with
# nothing the site compiled before: compiling it is a one-time cost, not a recompilation.
VARIANT_MIN_SIMILARITY = 0.9
# Earlier graphs of a site compared with a late one (the most recent; each alignment is
# quadratic in the worst case).
MAX_CANDIDATES = 8
_MAX_VALUES = 12
_T = TypeVar("_T")
_MAX_CHANGES = 12

# Priority of a difference when one must be named first: the most actionable cause first.
KINDS = (
    "data_dependent",
    "input_shapes",
    "baked_value",
    "constant",
    "attribute",
    "sizes",
    "parameters",
    "structure",
)


@dataclass
class InputChange:
    """A graph input whose shape changed between compiles, with where it came from."""

    parameter: int
    dtype: str
    source: Location | None  # the user's line that made or passed the input
    source_text: str | None
    shapes: list[tuple[int, ...]]
    varying_dims: dict[int, list[int]]
    data_dependent: str | None = None  # the op, when the shape depends on the data
    op_source: Location | None = None  # the input's own (innermost) frame, library or not
    # the user's frames of the stack that first used the input, innermost first (HloProto)
    user_frames: tuple[Location, ...] = ()

    def describe(self) -> str:
        where = f", from {self.source}" if self.source else ""
        if self.op_source is not None and self.op_source != self.source:
            where += f", first used at {self.op_source}"
        text = f": `{self.source_text}`" if self.source_text else ""
        shapes = " → ".join(f"[{', '.join(map(str, s))}]" for s in _dedupe(self.shapes))
        dims = "; ".join(
            f"dim {d} takes {' → '.join(map(str, v))}" for d, v in self.varying_dims.items()
        )
        cause = (
            f"; data-dependent shape from aten::{self.data_dependent}"
            if self.data_dependent
            else ""
        )
        return f"input {self.parameter} ({self.dtype}{where}{text}): shape {shapes}; {dims}{cause}"


@dataclass
class Change:
    """One difference between a late graph and the earlier graph it is compared with."""

    kind: str  # one of KINDS but "input_shapes"/"data_dependent" (those are InputChange)
    op: str  # the aten op (op_type) or the HLO opcode
    before: str | None
    after: str | None
    location: Location | None  # the user's line
    op_source: Location | None  # the op's own frame (may be a library's)
    count: int = 1

    def detail(self, sources: SourceFiles) -> dict[str, object]:
        where = self.location or self.op_source
        return {
            "change": self.kind,
            "op": self.op,
            "before": self.before,
            "after": self.after,
            "location": None if self.location is None else str(self.location),
            "op_source": None if self.op_source is None else str(self.op_source),
            "source_text": None if where is None else source_line(sources, where.file, where.line),
            "count": self.count,
        }


@dataclass
class GraphDiff:
    """How ``after`` differs from ``before`` (the most similar earlier graph of its site)."""

    before: GraphInfo
    after: GraphInfo
    similarity: float
    inputs: list[InputChange] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)

    @property
    def variant(self) -> bool:
        """The same computation with something changed (not a new graph first needed late)."""
        return self.similarity >= VARIANT_MIN_SIMILARITY

    @property
    def kind(self) -> str:
        found = {c.kind for c in self.changes}
        if self.inputs:
            found.add(
                "data_dependent" if any(c.data_dependent for c in self.inputs) else "input_shapes"
            )
        return next((k for k in KINDS if k in found), "nothing_visible")


@dataclass
class Explanation:
    # one of KINDS, or "nothing_visible" | "unknown"
    kind: str
    summary: str
    inputs: list[InputChange] = field(default_factory=list)
    first_difference: dict[str, object] | None = None
    changes: list[Change] = field(default_factory=list)
    diffs: list[GraphDiff] = field(default_factory=list)


def _dedupe(values: list[_T]) -> list[_T]:
    """``values`` without repeats in a row."""
    out: list[_T] = []
    for value in values:
        if not out or out[-1] != value:
            out.append(value)
    return out


def _key(instruction: Instruction) -> str:
    """What two ops must share to align: opcode and element type (not dimensions)."""
    dims = instruction.dims
    return f"{instruction.opcode}:{dims[0] if dims else instruction.shape.partition('[')[0]}"


def _fine_key(instruction: Instruction) -> str:
    """A stricter key (shape and aten op too): far fewer repeats, so aligning is fast."""
    return f"{instruction.opcode}:{instruction.shape}:{instruction.op_type}"


class Keys:
    """The alignment keys of each graph, computed once per analysis (graphs have thousands of
    ops and each is compared with several others)."""

    def __init__(self) -> None:
        self._coarse: dict[int, tuple[HloModule, list[str]]] = {}
        self._fine: dict[int, tuple[HloModule, list[str]]] = {}

    def coarse(self, module: HloModule) -> list[str]:
        return self._get(self._coarse, module, _key)

    def fine(self, module: HloModule) -> list[str]:
        return self._get(self._fine, module, _fine_key)

    @staticmethod
    def _get(
        cache: dict[int, tuple[HloModule, list[str]]], module: HloModule, key: object
    ) -> list[str]:
        found = cache.get(id(module))
        if found is None or found[0] is not module:
            found = (module, [key(i) for i in module.instructions])  # type: ignore[operator]
            cache[id(module)] = found
        return found[1]


def _opcodes(
    keys: Keys, before: HloModule, after: HloModule
) -> tuple[float, list[tuple[str, int, int, int, int]]]:
    """(share of ops aligned, difflib opcodes) for two graphs' instruction lists.

    Graphs whose ops are the same in order (a shape or a baked value changed) align one to one
    without a search. Otherwise the ops are aligned on the strict key first, which is fast;
    only where that aligns less than ``VARIANT_MIN_SIMILARITY`` (every shape changed as well) on
    the coarse one, whose many repeats make difflib slow on large graphs.
    """
    a, b = keys.coarse(before), keys.coarse(after)
    if a == b:
        return 1.0, [("equal", 0, len(a), 0, len(b))]
    fine = difflib.SequenceMatcher(a=keys.fine(before), b=keys.fine(after), autojunk=False)
    blocks = fine.get_matching_blocks()
    matched = sum(block.size for block in blocks)
    if 2.0 * matched / (len(a) + len(b)) < VARIANT_MIN_SIMILARITY:
        coarse = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
        return coarse.ratio(), [
            (str(tag), i1, i2, j1, j2) for tag, i1, i2, j1, j2 in coarse.get_opcodes()
        ]
    # the strict alignment, then ops between its blocks paired where the coarse keys agree
    opcodes: list[tuple[str, int, int, int, int]] = []
    i = j = 0
    for block in blocks:
        if block.a > i or block.b > j:
            gap = difflib.SequenceMatcher(a=a[i : block.a], b=b[j : block.b], autojunk=False)
            for tag, i1, i2, j1, j2 in gap.get_opcodes():
                opcodes.append((tag, i + i1, i + i2, j + j1, j + j2))
                if tag == "equal":
                    matched += i2 - i1
        if block.size:
            opcodes.append(("equal", block.a, block.a + block.size, block.b, block.b + block.size))
        i, j = block.a + block.size, block.b + block.size
    return 2.0 * matched / (len(a) + len(b)), opcodes


def _own(instruction: Instruction) -> Location | None:
    if instruction.source_file and instruction.source_line:
        return Location(instruction.source_file, instruction.source_line)
    return None


def _user(instruction: Instruction) -> Location | None:
    if instruction.user_file and instruction.user_line:
        return Location(instruction.user_file, instruction.user_line)
    own = _own(instruction)
    return own if own is not None and not is_library_file(own.file) else None


def user_frames(instruction: Instruction) -> tuple[Location, ...]:
    """The user's frames of an op's stack, innermost first (its own line without a stack)."""
    if instruction.stack:
        return tuple(
            Location(frame.file, frame.line)
            for frame in instruction.stack
            if frame.file and frame.line and not is_library_file(frame.file)
        )
    user = _user(instruction)
    return () if user is None else (user,)


def _where(*instructions: Instruction | None) -> tuple[Location | None, Location | None]:
    """(user's line, own line) of the first of ``instructions`` that has one."""
    present = [i for i in instructions if i is not None]
    user = next((u for u in map(_user, present) if u is not None), None)
    own = next((o for o in map(_own, present) if o is not None), None)
    return user, own


def most_similar(
    after: GraphInfo, earlier: list[GraphInfo], keys: Keys | None = None
) -> GraphInfo | None:
    """The earlier graph whose ops overlap ``after``'s most (ties: the latest)."""
    if after.hlo is None:
        return None
    keys = keys or Keys()
    target = keys.coarse(after.hlo)
    candidates = [g for g in earlier if g.hlo is not None][-MAX_CANDIDATES:]
    best, best_score = None, -1.0
    for graph in candidates:
        assert graph.hlo is not None
        matcher = difflib.SequenceMatcher(a=keys.coarse(graph.hlo), b=target, autojunk=False)
        score = matcher.quick_ratio()
        if score >= best_score:
            best, best_score = graph, score
    return best


def diff(
    before: GraphInfo,
    after: GraphInfo,
    dynamic_sites: dict[Location, str],
    keys: Keys | None = None,
    sources: SourceFiles | None = None,
) -> GraphDiff:
    """Align ``before`` and ``after`` op by op and name every difference (module docstring);
    source lines quoted from ``sources`` (none by default)."""
    sources = sources or SourceFiles()
    assert before.hlo is not None and after.hlo is not None
    old, new = before.hlo.instructions, after.hlo.instructions
    similarity, opcodes = _opcodes(keys or Keys(), before.hlo, after.hlo)
    result = GraphDiff(before, after, similarity)
    removed: list[Instruction] = []
    added: list[tuple[Instruction, Instruction | None]] = []  # (op, nearest aligned old op)
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            for x, y in zip(old[i1:i2], new[j1:j2], strict=True):
                _compare_aligned(x, y, result, dynamic_sites, sources)
            continue
        near = old[i1] if i1 < len(old) else (old[i1 - 1] if i1 else None)
        paired = min(i2 - i1, j2 - j1)
        for x, y in zip(old[i1 : i1 + paired], new[j1 : j1 + paired], strict=True):
            if x.opcode == "parameter" and y.opcode == "constant":
                user, own = _where(x, y)
                result.changes.append(
                    Change("baked_value", x.op_type or "device data", x.shape, y.literal, user, own)
                )
            else:
                removed.append(x)
                added.append((y, x))
        removed.extend(old[i1 + paired : i2])
        added.extend((y, near) for y in new[j1 + paired : j2])
    _fold_added(result, removed, added)
    return result


def _compare_aligned(
    x: Instruction,
    y: Instruction,
    result: GraphDiff,
    dynamic_sites: dict[Location, str],
    sources: SourceFiles,
) -> None:
    user, own = _where(y, x)
    if x.opcode == "parameter":
        if x.shape != y.shape and x.dims and y.dims and len(x.dims[1]) == len(y.dims[1]):
            result.inputs.append(_input_change(x, y, dynamic_sites, sources))
        return
    op = y.op_type or x.op_type or y.opcode
    if x.shape != y.shape:
        result.changes.append(Change("sizes", op, x.shape, y.shape, user, own))
    elif x.opcode == "constant" and x.literal != y.literal:
        result.changes.append(Change("constant", op, x.literal, y.literal, user, own))
    elif x.attributes != y.attributes:
        result.changes.append(Change("attribute", op, x.attributes, y.attributes, user, own))


def _input_change(
    x: Instruction, y: Instruction, dynamic_sites: dict[Location, str], sources: SourceFiles
) -> InputChange:
    assert x.dims is not None and y.dims is not None
    user, own = _where(y, x)
    shapes = [x.dims[1], y.dims[1]]
    where = user or own
    text = source_line(sources, where.file, where.line) if where else None
    own_text = text
    if own is not None and own != where:
        own_text = source_line(sources, own.file, own.line)
    dynamic = dynamic_sites.get(own) if own is not None else None
    if dynamic is None and user is not None:
        dynamic = dynamic_sites.get(user)
    if dynamic is None:
        dynamic = data_dependent_op(own_text)
    return InputChange(
        parameter=y.parameter if y.parameter is not None else 0,
        dtype=y.dims[0],
        source=user,
        source_text=text,
        shapes=shapes,
        varying_dims=_varying(shapes),
        data_dependent=dynamic,
        op_source=own,
        user_frames=user_frames(y) or user_frames(x),
    )


def _varying(shapes: list[tuple[int, ...]]) -> dict[int, list[int]]:
    return {
        axis: _dedupe([s[axis] for s in shapes])[:_MAX_VALUES]
        for axis in range(len(shapes[0]))
        if len({s[axis] for s in shapes}) > 1
    }


def data_dependent_op(text: str | None) -> str | None:
    """The op with a data-dependent output shape a source line calls, if its text shows one.

    ``nonzero(``, ``masked_select(``, ``unique(`` by name, and ``torch.where(cond)`` with one
    argument (which is ``nonzero(cond, as_tuple=True)``).
    """
    if not text:
        return None
    found = next((op for op in DYNAMIC_SHAPE_OPS if f"{op}(" in text), None)
    if found is not None:
        return found
    if "where(" in text and _one_argument_where(text.strip()):
        return "nonzero"
    return None


@functools.lru_cache(maxsize=256)
def _one_argument_where(text: str) -> bool:
    candidates = [text, text.rstrip(":") + " pass" if text.endswith(":") else text]
    for candidate in candidates:
        try:
            tree = ast.parse(candidate)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or node.keywords or len(node.args) != 1:
                continue
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else None
            if isinstance(function, ast.Name):
                name = function.id
            if name == "where":
                return True
        return False
    return False


def _fold_added(
    result: GraphDiff,
    removed: list[Instruction],
    added: list[tuple[Instruction, Instruction | None]],
) -> None:
    """Ops only one graph has: parameters gone or added, ops gone or added, one change per op
    and line. Constants added with the value a graph input was baked into are that input's
    other uses (torch_xla emits one constant per use), counted with it."""
    baked = {c.after: c for c in result.changes if c.kind == "baked_value"}
    grouped: dict[tuple[str, str, str | None, Location | None], Change] = {}

    def note(
        kind: str, op: str, before: str | None, after: str | None, *ops: Instruction | None
    ) -> None:
        user, own = _where(*ops)
        key = (kind, op, before if kind == "parameters" else None, user or own)
        if key in grouped:
            grouped[key].count += 1
        else:
            grouped[key] = Change(kind, op, before, after, user, own)

    for x in removed:
        if x.opcode == "parameter":
            note("parameters", x.op_type or "device data", x.shape, None, x)
        else:
            note("structure", x.op_type or x.opcode, x.opcode, None, x)
    for y, near in added:
        if y.opcode == "constant" and y.literal in baked:
            baked[y.literal].count += 1
        elif y.opcode == "parameter":
            note("parameters", y.op_type or "device data", None, y.shape, y, near)
        else:
            note("structure", y.op_type or y.opcode, None, y.opcode, y, near)
    result.changes.extend(grouped.values())


def explain(
    graphs: list[GraphInfo],
    dynamic_sites: dict[Location, str],
    late: Iterable[GraphInfo] | None = None,
    sources: SourceFiles | None = None,
) -> Explanation:
    """Explain what changed in a site's ``late`` graphs (default: all but the first).

    ``graphs`` are the site's compiled graphs in compile order. Each late graph is diffed with
    the most similar graph compiled before it; the differences of all late graphs are merged,
    and the explanation's kind is the most actionable one found (``KINDS``).
    """
    kept = [g for g in graphs if g.hlo is not None]
    targets = [g for g in (kept[1:] if late is None else late) if g.hlo is not None]
    diffs = []
    keys = Keys()
    for target in targets:
        earlier = [g for g in kept if g.order < target.order]
        before = most_similar(target, earlier, keys)
        if before is not None:
            diffs.append(diff(before, target, dynamic_sites, keys, sources))
    if not diffs:
        return Explanation("unknown", "the graphs were not kept, so what changed is unknown")
    return merge(diffs, sources=sources)


def merge(
    diffs: list[GraphDiff],
    context: list[GraphDiff] | None = None,
    sources: SourceFiles | None = None,
) -> Explanation:
    """One explanation from the diffs of a site's late graphs.

    ``context`` are diffs of the site's warm-up graphs: they add the values seen before the
    late compiles (a slice's first bounds, the first batch size) to the changes the late diffs
    found, and nothing else.
    """
    ordered = sorted([*diffs, *(context or [])], key=lambda d: d.after.order)
    inputs = _merge_inputs(ordered, _input_keys(diffs))
    changes = _merge_changes(ordered, _change_keys(diffs))
    found = {c.kind for c in changes}
    if inputs:
        found.add("data_dependent" if any(c.data_dependent for c in inputs) else "input_shapes")
    kind = next((k for k in KINDS if k in found), "nothing_visible")
    if kind in ("data_dependent", "input_shapes"):
        shown = sorted(inputs, key=lambda c: c.data_dependent is None)
        summary = "; ".join(c.describe() for c in shown[:4])
        return Explanation(kind, summary, inputs=shown, changes=changes, diffs=diffs)
    if kind == "nothing_visible":
        return Explanation(
            kind,
            "the graphs have the same inputs, ops and attributes: the graph hash changed for a "
            "reason the graphs do not show",
            changes=changes,
            diffs=diffs,
        )
    primary = next(c for c in changes if c.kind == kind)
    return Explanation(
        kind,
        describe(primary, [c for c in changes if c.kind == kind]),
        inputs=inputs,
        first_difference=primary.detail(sources or SourceFiles()),
        changes=changes,
        diffs=diffs,
    )


def _input_key(change: InputChange) -> tuple[object, ...]:
    """One input across a site's graphs: where it comes from, its type and its number (two
    inputs made on one line, ``x, y = make_batch(n)``, stay apart)."""
    return (change.parameter, change.source, change.op_source, change.dtype, len(change.shapes[0]))


def _input_keys(diffs: list[GraphDiff]) -> set[tuple[object, ...]]:
    return {_input_key(c) for d in diffs for c in d.inputs}


def _change_key(change: Change) -> tuple[object, ...]:
    return (change.kind, change.op, change.location or change.op_source)


def _change_keys(diffs: list[GraphDiff]) -> set[tuple[object, ...]]:
    return {_change_key(c) for d in diffs for c in d.changes}


def _merge_inputs(diffs: list[GraphDiff], keys: set[tuple[object, ...]]) -> list[InputChange]:
    """Input changes of the diffs whose key is in ``keys``, one per input (its source and
    dtype), shapes in the order seen."""
    merged: dict[tuple[object, ...], InputChange] = {}
    for graph_diff in diffs:
        for change in graph_diff.inputs:
            key = _input_key(change)
            if key not in keys:
                continue
            if key not in merged:
                merged[key] = change
                continue
            known = merged[key]
            known.shapes = _dedupe([*known.shapes, *change.shapes])
            known.varying_dims = _varying(known.shapes)
            known.data_dependent = known.data_dependent or change.data_dependent
    return list(merged.values())


def _merge_changes(diffs: list[GraphDiff], keys: set[tuple[object, ...]]) -> list[Change]:
    """Changes of the diffs whose key is in ``keys``, one per kind, op and line; values listed
    in the order seen, graph by graph: one value pair per graph (a key's several ops in one
    graph, each use of a constant or a shape, would otherwise read as values that alternate
    from graph to graph), the one that goes on from the previous graph's value."""
    merged: dict[tuple[object, ...], Change] = {}
    values: dict[tuple[object, ...], list[str | None]] = {}
    for graph_diff in diffs:
        pairs: dict[tuple[object, ...], list[tuple[str | None, str | None]]] = {}
        for change in graph_diff.changes:
            key = _change_key(change)
            if key not in keys:
                continue
            pairs.setdefault(key, []).append((change.before, change.after))
            if key not in merged:
                merged[key] = Change(**change.__dict__)
                values[key] = []
            else:
                merged[key].count += change.count
        for key, seen_here in pairs.items():
            last = values[key][-1:]
            values[key].extend(next((p for p in seen_here if [p[0]] == last), seen_here[0]))
    for key, change in merged.items():
        seen = _dedupe(values[key])
        if change.kind in ("attribute", "constant", "sizes") and len(seen) > 2:
            change.before = seen[0]
            change.after = " → ".join(str(v) for v in seen[1:_MAX_VALUES])
    return sorted(merged.values(), key=lambda c: KINDS.index(c.kind))[: _MAX_CHANGES * 4]


def describe(change: Change, same_kind: list[Change]) -> str:
    """One sentence for a change (and how many others of its kind there are)."""
    where = f" at {change.location}" if change.location else ""
    if change.op_source is not None and change.op_source != change.location:
        where += f" (the op: {change.op_source})"
    others = len(same_kind) - 1
    kind = change.kind
    if kind == "parameters":
        kind = "parameter_gone" if change.after is None else "parameter_new"
    if kind == "structure":
        kind = "op_gone" if change.before is not None else "op_new"
    return _SENTENCES[kind].format(
        before=change.before,
        after=change.after,
        op=change.op,
        where=where,
        uses=f" ({change.count} uses)" if change.count > 1 else "",
        what="slice bounds" if "slice=" in (change.before or "") else "op attributes",
        more=f"; {others} more of this kind" if others > 0 else "",
    )


_BRANCH = " — a Python branch on data, a changing Python constant or another code path"
_SENTENCES = {
    "baked_value": (
        "a value passed to the graph as device data ({before}, {op}){where} was baked into it "
        "as the constant {after}{uses}: torch_xla bakes a Python number equal to 0 or 1 in the "
        "tensor's dtype into the graph{more}"
    ),
    "constant": (
        "a constant baked into the graph changes ({before} → {after}){where}: a Python number "
        "passed to {op}{more}"
    ),
    "attribute": (
        "{what} baked into the graph change: {before} → {after} in {op}{where}: a Python "
        "number used as a bound or size{more}"
    ),
    "sizes": (
        "shapes change with no input changing: {op} {before} → {after}{where}: a size made from "
        "a Python number (an arange, a slice length){more}"
    ),
    "parameter_gone": "a graph input is gone: {before} ({op}){where}{more}",
    "parameter_new": "a graph input is new: {after} ({op}){where}{more}",
    "op_gone": "the graph's ops differ: {op} ({before}) is gone{where}" + _BRANCH + "{more}",
    "op_new": "the graph's ops differ: {op} ({after}) is new{where}" + _BRANCH + "{more}",
}
