"""What the live module tree (``modules.json``, ``xlaprof.capture.modules``) says a repeated
block is: a stack of identical layers in an ``nn.ModuleList``/``nn.Sequential``, or one module
called again and again in a time loop; and the finding named and located from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xlaprof.analyzers.shared.sourcecode import enclosing_loop, time_loop_sketch
from xlaprof.analyzers.unrolled_loop.repeats import EDGE_BLOCKS, MIN_REPEATS, Repeat
from xlaprof.findings import Finding, Kind, Location, Severity, bench_command


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
    for site in entry.get("sites") or entry.get("child_sites") or []:
        if bool(site.get("direct")) == direct:
            location = Location.parse(str(site.get("where", "")))
            if location is not None:
                return location
    return None


def match_modules(
    modules: dict[str, Any] | None, repeats: int, block_files: set[str]
) -> ModuleMatch | None:
    """The stack or time loop whose unit count is the block's repeat count (edges allowed)."""
    if not modules:
        return None
    candidates: list[tuple[tuple[int, int, int], ModuleMatch]] = []
    for stack in modules.get("stacks") or []:
        children = [(c.get("class", ""), c.get("params", "")) for c in stack.get("children", [])]
        start, period, units = repeating_units(children)
        if units < MIN_REPEATS or abs(units - repeats) > EDGE_BLOCKS:
            continue
        unit = children[start : start + period]
        if not any(params for _cls, params in unit):
            continue  # no parameters: nothing scan_layers could stack
        unit_files = {c.get("file") for c in stack.get("children", [])[start : start + period]}
        location = None
        child_call = _site({"sites": stack.get("child_sites")}, direct=True)
        if child_call is not None:
            loop = enclosing_loop(child_call.file, child_call.line)
            location = Location(child_call.file, loop) if loop is not None else child_call
        else:
            location = _site(stack, direct=True)
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
        )
        score = (abs(units - repeats), 0 if unit_files & block_files else 1, 0)
        candidates.append((score, match))
    for entry in modules.get("repeated") or []:
        calls = int(entry.get("calls") or 0)
        if calls < MIN_REPEATS or abs(calls - repeats) > EDGE_BLOCKS:
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


def module_finding(
    match: ModuleMatch,
    primary: Repeat,
    share: float,
    evidence: dict[str, object],
    script: str | None,
) -> Finding:
    """A finding named and located from the live module tree (capture/modules.py)."""
    evidence["module_source"] = "live module tree (modules.json)"
    if match.location is not None:
        evidence["loop"] = str(match.location)
    if match.kind == "time":
        return _time_loop_finding(match, primary, share, evidence)
    return _stack_finding(match, primary, share, evidence, script)


def _time_loop_finding(
    match: ModuleMatch, primary: Repeat, share: float, evidence: dict[str, object]
) -> Finding:
    """One module called ``match.units`` times a step: a ``scan`` over the time loop."""
    unit = ", ".join(match.unit_classes)
    evidence["repeated_module"] = f"{match.name} ({unit}), called {match.units} times a step"
    sketch = time_loop_sketch(match.call.file, match.call.line) if match.call is not None else None
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


def _stack_finding(
    match: ModuleMatch,
    primary: Repeat,
    share: float,
    evidence: dict[str, object],
    script: str | None,
) -> Finding:
    """A stack of identical layers: ``scan_layers`` over it (where it is one attribute of one
    owner and one layer class), else grouping each repeating unit into a module first."""
    unit = ", ".join(match.unit_classes)
    owned = match.attribute is not None and match.owner_class is not None
    if owned:
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
    scannable = owned and single
    if scannable:
        evidence["layer_stack_owner"] = match.owner_class
        evidence["layer_stack_attribute"] = match.attribute
        evidence["bench_command"] = bench_command("scan", script, f" --layers {match.attribute}")
    where = match.location
    if scannable:
        how = (
            f"Replace the loop at {where} with:\n"
            "    from torch_xla.experimental.scan_layers import scan_layers\n"
            f"    x = scan_layers({name}, x)   # x: the loop's input and output\n"
        )
    else:
        how = (
            f"Group each repeating unit ({unit}) into one nn.Module, hold the {match.units} "
            "units in an nn.ModuleList and run them with "
            "torch_xla.experimental.scan_layers.scan_layers(layers, x) instead of calling the "
            f"stack at {where}.\n"
        )
    return Finding(
        kind=Kind.UNROLLED_LOOP,
        severity=Severity.WARNING,
        title=(
            f"Unrolled loop: {name} ({stack_text}) traced as {primary.repeats} identical "
            f"copies of a {primary.block_ops}-op block ({share:.0%} of the graph)"
        ),
        evidence=evidence,
        location=where,
        suggestion=how + _CAVEATS.format(repeats=primary.repeats),
    )


_CAVEATS = (
    "XLA then compiles one layer instead of {repeats}. Caveats (torch_xla docs): the "
    "layers must be homogeneous (same structure, parameter shapes and computation); no "
    "custom Pallas kernels inside them; pass is_layer_pure=True when each layer is a pure "
    "function of its inputs and parameters, so the layer is traced once and cached. "
    "Measure before and after on your model (a bench command is in the evidence where "
    "the stack is an attribute scan_layers can take): on some backends the scanned step runs "
    "slower even as compilation gets faster."
)
