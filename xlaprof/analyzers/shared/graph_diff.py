"""What changed between the graphs one source line compiled: the recompilation root cause.

Given the graphs a site compiled, in order:

* graphs with the same parameters in the same places are compared input by input: an input
  whose shape changes is named with the line that created it and the dimensions that vary (the
  values seen, in order);
* an input created by an op with a data-dependent output shape (``nonzero``, ``masked_select``,
  ``unique``; seen in the fallback tracker at that line or in the line's text) is explained as
  such;
* graphs whose structure differs are aligned, and the first op that differs is named with its
  source line;
* graphs that are the same in shapes and structure are reported as such: the hash changed for
  a reason the graphs do not show, and the report says so rather than guess.
"""

from __future__ import annotations

import difflib
import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TypeVar

from xlaprof.analyzers.shared.sourcecode import source_line
from xlaprof.findings import Location
from xlaprof.parse.hlo import HloModule, Instruction
from xlaprof.rundir.schema import GraphInfo

DYNAMIC_SHAPE_OPS = ("nonzero", "masked_select", "unique", "unique2", "unique_consecutive")
_MAX_VALUES = 12
_T = TypeVar("_T")


@dataclass
class InputChange:
    parameter: int
    dtype: str
    source: Location | None
    source_text: str | None
    shapes: list[tuple[int, ...]]
    varying_dims: dict[int, list[int]]
    data_dependent: str | None = None  # the op, when the shape depends on the data

    def describe(self) -> str:
        where = f", created at {self.source}" if self.source else ""
        text = f": `{self.source_text}`" if self.source_text else ""
        shapes = " → ".join(f"[{', '.join(map(str, s))}]" for s in _dedupe(self.shapes))
        rank = len(self.shapes[0]) if self.shapes else 0
        dims = "; ".join(
            f"dim {d} varies ({', '.join(map(str, v))})"
            + (
                " (likely the batch size)"
                if d == 0 and rank >= 2 and not self.data_dependent
                else ""
            )
            for d, v in self.varying_dims.items()
        )
        cause = (
            f"; data-dependent shape from aten::{self.data_dependent}"
            if self.data_dependent
            else ""
        )
        return f"input {self.parameter} ({self.dtype}{where}{text}): shape {shapes}; {dims}{cause}"


@dataclass
class Explanation:
    # "input_shapes" | "data_dependent" | "constant" | "structure" | "nothing_visible" | "unknown"
    kind: str
    summary: str
    inputs: list[InputChange] = field(default_factory=list)
    first_difference: dict[str, object] | None = None


def _dedupe(values: list[_T]) -> list[_T]:
    """``values`` without repeats in a row."""
    out: list[_T] = []
    for value in values:
        if not out or out[-1] != value:
            out.append(value)
    return out


def _location(instruction: Instruction) -> Location | None:
    if instruction.source_file and instruction.source_line:
        return Location(instruction.source_file, instruction.source_line)
    return None


def _signature(module: HloModule) -> list[str]:
    return [i.signature for i in module.instructions if i.opcode != "parameter"]


def explain(graphs: list[GraphInfo], dynamic_sites: dict[Location, str]) -> Explanation:
    """Explain what differs across ``graphs`` (one site's compilations, in order)."""
    modules = [g.hlo for g in graphs if g.hlo is not None]
    if len(modules) < 2:
        return Explanation("unknown", "the graphs were not kept, so what changed is unknown")
    # Warm-up adds optimizer state (more parameters): compare the largest same-arity group.
    groups: dict[int, list[HloModule]] = defaultdict(list)
    for module in modules:
        groups[len(module.parameters)].append(module)
    same_arity = max(groups.values(), key=len)
    if len(same_arity) >= 2:
        changes = _input_changes(same_arity, dynamic_sites)
        if changes:
            dynamic = [c for c in changes if c.data_dependent]
            kind = "data_dependent" if dynamic else "input_shapes"
            return Explanation(kind, "; ".join(c.describe() for c in changes), inputs=changes)
        constant = _constant_difference(same_arity)
        if constant is not None:
            return constant
        structure = _first_difference(same_arity)
        if structure is not None:
            return structure
        if len(groups) == 1:
            return Explanation(
                "nothing_visible",
                "the graphs have the same input shapes and the same structure: the graph hash "
                "changed for a reason the graphs do not show (for example a constant baked "
                "into the graph)",
            )
    return _first_difference(modules) or Explanation(
        "unknown", "the graphs differ in their inputs' number, not in a way that can be named"
    )


def _input_changes(
    modules: list[HloModule], dynamic_sites: dict[Location, str]
) -> list[InputChange]:
    changes = []
    parameter_lists = [m.parameters for m in modules]
    for position, first in enumerate(parameter_lists[0]):
        dims = [params[position].dims for params in parameter_lists]
        if any(d is None for d in dims) or len({d[0] for d in dims if d}) != 1:
            continue
        shapes = [d[1] for d in dims if d is not None]
        if len(set(shapes)) < 2 or len({len(s) for s in shapes}) != 1:
            continue
        varying = {
            axis: _dedupe([s[axis] for s in shapes])[:_MAX_VALUES]
            for axis in range(len(shapes[0]))
            if len({s[axis] for s in shapes}) > 1
        }
        location = _location(first)
        text = source_line(location.file, location.line) if location else None
        dynamic = dynamic_sites.get(location) if location else None
        if dynamic is None and text:
            dynamic = next((op for op in DYNAMIC_SHAPE_OPS if f"{op}(" in text), None)
        changes.append(
            InputChange(
                parameter=first.parameter if first.parameter is not None else position,
                dtype=dims[0][0] if dims[0] else "?",
                source=location,
                source_text=text,
                shapes=shapes,
                varying_dims=varying,
                data_dependent=dynamic,
            )
        )
    return changes


def _constant_difference(modules: list[HloModule]) -> Explanation | None:
    """Graphs with the same ops whose constants differ: a Python number baked into the graph.

    A constant has no source line of its own; torch_xla emits it just before the op that uses
    it, so the first op after it with a source line names where the number went in.
    """
    for before, after in itertools.pairwise(modules):
        if _signature(before) != _signature(after):
            continue
        for old, new in zip(before.instructions, after.instructions, strict=False):
            if old.opcode != "constant" or old.literal == new.literal:
                continue
            user = next(
                (i for i in after.instructions[new.index :] if i.source_file and i.source_line),
                None,
            )
            location = _location(user) if user is not None else None
            detail: dict[str, object] = {
                "op": user.op_type if user is not None else "constant",
                "hlo": new.signature,
                "constant": f"{old.literal} → {new.literal}",
                "location": None if location is None else str(location),
                "source_text": None
                if location is None
                else source_line(location.file, location.line),
            }
            where = f" at {location}" if location else ""
            return Explanation(
                "constant",
                f"same inputs and ops, but a constant baked into the graph changes "
                f"({old.literal} → {new.literal}){where}: a Python number passed to an op",
                first_difference=detail,
            )
    return None


def _first_difference(modules: list[HloModule]) -> Explanation | None:
    for before, after in itertools.pairwise(modules):
        a, b = _signature(before), _signature(after)
        if a == b:
            continue
        matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
        for tag, i1, _i2, j1, _j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            ops_after = [i for i in after.instructions if i.opcode != "parameter"]
            ops_before = [i for i in before.instructions if i.opcode != "parameter"]
            instruction = (
                ops_after[j1] if j1 < len(ops_after) else ops_before[min(i1, len(ops_before) - 1)]
            )
            location = _location(instruction)
            detail: dict[str, object] = {
                "op": instruction.op_type or instruction.opcode,
                "hlo": instruction.signature,
                "location": None if location is None else str(location),
                "source_text": None
                if location is None
                else source_line(location.file, location.line),
            }
            where = f" at {location}" if location else ""
            return Explanation(
                "structure",
                f"same inputs but a different graph: the first differing op is "
                f"{detail['op']} ({instruction.signature}){where} — a Python branch on data, a "
                "changing Python constant or another code path",
                first_difference=detail,
            )
    return None
