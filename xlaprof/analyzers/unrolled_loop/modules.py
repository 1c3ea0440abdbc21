"""What the live module tree (``modules.json``, ``xlaprof.capture.modules``) says a repeated
block is: a stack of identical layers in an ``nn.ModuleList``/``nn.Sequential`` (applied by the
user's code or inside a library), or one module called again and again in a time loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xlaprof.analyzers.shared.sourcecode import caller_loop, enclosing_loop
from xlaprof.analyzers.unrolled_loop.repeats import EDGE_BLOCKS, MIN_REPEATS
from xlaprof.findings import Location
from xlaprof.model.sources import SourceFiles

# How a candidate ranks (lowest first): how far its unit count is from the repeat count,
# whether the block's files are its own (0) or not (1), a stack (0) before a time loop (1).
_Score = tuple[int, int, int]


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


def repeating_units(children: list[tuple[str, str]]) -> tuple[int, int, int]:
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
    """The first call site an entry recorded (``sites``, else ``child_sites``) that is (or,
    with ``direct`` False, is not) the user's own line calling the module."""
    for recorded in entry.get("sites") or entry.get("child_sites") or []:
        if bool(recorded.get("direct")) == direct:
            file, _, line = str(recorded.get("where", "")).rpartition(":")
            if file and line.isdigit():
                return Location(file, int(line))
    return None


def _loop_line(sources: SourceFiles, call: Location, applied: dict[str, Any] | None) -> int | None:
    """The loop around the user's call of each layer: from the source where it is readable,
    else as the capture read it (``applied_by.loop_line``) for that same call."""
    loop = enclosing_loop(sources, call.file, call.line)
    if loop is None and applied is not None and applied.get("file") == call.file:
        recorded = applied.get("loop_line")
        loop = recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else None
    return loop


def match_modules(
    sources: SourceFiles, modules: dict[str, Any] | None, repeats: int, block_files: set[str]
) -> ModuleMatch | None:
    """The stack or time loop whose unit count is the block's repeat count (edges allowed)."""
    if not modules:
        return None
    candidates: list[tuple[_Score, ModuleMatch]] = []
    for stack in modules.get("stacks") or []:
        found = _stack_match(sources, stack, repeats, block_files)
        if found is not None:
            candidates.append(found)
    for entry in modules.get("repeated") or []:
        found = _time_match(sources, entry, repeats, block_files)
        if found is not None:
            candidates.append(found)
    if not candidates:
        return None
    return min(candidates, key=lambda c: c[0])[1]


def _stack_match(
    sources: SourceFiles, stack: dict[str, Any], repeats: int, block_files: set[str]
) -> tuple[_Score, ModuleMatch] | None:
    """A ModuleList/Sequential whose units repeat about ``repeats`` times and hold parameters."""
    children = [(c.get("class", ""), c.get("params", "")) for c in stack.get("children", [])]
    start, period, units = repeating_units(children)
    if units < MIN_REPEATS or abs(units - repeats) > EDGE_BLOCKS:
        return None
    unit = children[start : start + period]
    if not any(params for _cls, params in unit):
        return None  # no parameters: nothing scan_layers could stack
    unit_files = {c.get("file") for c in stack.get("children", [])[start : start + period]}
    applied = stack.get("applied_by") if isinstance(stack.get("applied_by"), dict) else None
    child_call = _site({"sites": stack.get("child_sites")}, direct=True)
    location, in_library = _stack_location(sources, stack, child_call, applied)
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
    return (abs(units - repeats), 0 if unit_files & block_files else 1, 0), match


def _stack_location(
    sources: SourceFiles,
    stack: dict[str, Any],
    child_call: Location | None,
    applied: dict[str, Any] | None,
) -> tuple[Location | None, bool]:
    """Where a stack's finding points, and whether the code applying it is a library's: the
    loop around the user's call of each layer, else the user's line calling the stack."""
    if child_call is not None:
        loop = _loop_line(sources, child_call, applied)
        if loop is not None:
            return Location(
                child_call.file, loop, "the loop over the layer stack, traced unrolled"
            ), False
        return Location(
            child_call.file, child_call.line, "your call of each layer of the stack"
        ), False
    location = _site(stack, direct=True)
    if location is not None:
        return Location(location.file, location.line, "your call of the layer stack"), False
    # The stack is applied inside a library (transformers' LlamaModel, timm's
    # VisionTransformer): the user's line is the call that led there.
    location = _site({"sites": stack.get("child_sites")}, direct=False) or _site(
        stack, direct=False
    )
    if location is not None:
        location = Location(
            location.file, location.line, "your call into the library that applies the layers"
        )
    return location, applied is None or bool(applied.get("library", True))


def _time_match(
    sources: SourceFiles, entry: dict[str, Any], repeats: int, block_files: set[str]
) -> tuple[_Score, ModuleMatch] | None:
    """One module called about ``repeats`` times a step from the user's line, in a loop."""
    calls = int(entry.get("calls") or 0)
    if calls < MIN_REPEATS or abs(calls - repeats) > EDGE_BLOCKS:
        return None
    call = _site(entry, direct=True)
    if call is None:
        return None
    # the loop around the call, or around the call of the function making it (the body a
    # Python loop repeats, where the finding is placed)
    loop = enclosing_loop(sources, call.file, call.line) or caller_loop(
        sources, call.file, call.line
    )
    match = ModuleMatch(
        kind="time",
        units=calls,
        unit_classes=(str(entry.get("class")),),
        container=None,
        owner_class=None,
        attribute=None,
        name=entry.get("name"),
        location=(
            Location(call.file, loop, "the Python loop that applies the module each iteration")
            if loop is not None
            else Location(call.file, call.line, "your call of the module the graph repeats")
        ),
        call=call,
    )
    return (abs(calls - repeats), 0 if entry.get("file") in block_files else 1, 1), match
