"""The ``scan_layers`` rewrite of a layer stack, written from how its layers are called.

``capture/modules.py`` records each stack's first layer call: the kinds of its positional and
keyword arguments and of its output (``modules.json``, ``call``). ``scan_layers(layers, carry)``
runs ``layer(*carry)`` when the carry is a tuple and needs the same carry back, so a layer called
``layer(hidden, mask)`` and returning ``(hidden, probs)`` cannot be scanned as written: each one
is wrapped to take and return the whole carry, its other outputs dropped. Plain values (``None``,
``False``) stay fixed in the call; integer tensors cannot ride in the carry (scan differentiates
it); a Python object handed to every layer (a key-value cache) cannot be scanned at all.

This module turns a recorded call (and, where the user's source is readable, the loop's own
statement, for the user's names) into the text of that rewrite, and says in words what a call
is, for stacks whose loop lives in a library. The same wrapping is what ``xlaprof bench scan``
applies to a live model (``fixes/variants.py``), where it is measured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from xlaprof.analyzers.shared.sourcecode import LoopCall

_PLAIN = {"None", "bool", "int", "float", "str"}
_NAME = re.compile(r"^[A-Za-z_]\w*$")


@dataclass(frozen=True)
class Argument:
    """One argument of the recorded call: its name in the rewrite, kind, and how it travels."""

    name: str  # the parameter name in the wrapper's forward (or the keyword)
    text: str  # how the user's loop passes it (source text), or ``name``
    kind: str  # as recorded: tensor, tensor:torch.int64, None, tuple(tensor,tensor), ...
    keyword: str | None  # the keyword it is passed by, or None for a positional one

    @property
    def how(self) -> str:
        """``carry`` (a floating tensor or tuple of them), ``fixed`` (a plain value),
        ``integer`` (a non-floating tensor) or ``object`` (anything else)."""
        if self.kind == "tensor" or (
            self.kind.startswith("tuple(")
            and self.kind[6:-1]
            and all(k == "tensor" for k in self.kind[6:-1].split(","))
        ):
            return "carry"
        if self.kind in _PLAIN:
            return "fixed"
        if self.kind.startswith("tensor:") or "tensor:" in self.kind:
            return "integer"
        return "object"


def describe_kind(kind: str) -> str:
    """A recorded kind in words: ``a tensor``, ``an int64 tensor``, ``2 tensors``, ``None``."""
    if kind == "tensor":
        return "a tensor"
    if kind.startswith("tensor:"):
        dtype = kind.removeprefix("tensor:").removeprefix("torch.")
        return f"{'an' if dtype[:1] in 'aeiou' else 'a'} {dtype} tensor"
    if kind.startswith("tuple(") and kind.endswith(")"):
        items = [k for k in kind[6:-1].split(",") if k]
        if items and all(k == "tensor" for k in items):
            return f"{len(items)} tensors"
        return f"a tuple of {len(items)}"
    return kind


def arguments(call: dict[str, Any], source: LoopCall | None = None) -> list[Argument]:
    """The recorded call's arguments, named by the user's loop where its text is known."""
    found = []
    positional = [str(k) for k in call.get("args") or []]
    texts = list(source.args) if source is not None else []
    for index, kind in enumerate(positional):
        text = texts[index] if index < len(texts) else ""
        name = text if _NAME.match(text) else ("x" if index == 0 else f"arg{index}")
        found.append(Argument(name, text or name, kind, None))
    keyword_texts = dict(source.keywords) if source is not None else {}
    for keyword, kind in (call.get("kwargs") or {}).items():
        text = keyword_texts.get(keyword, "")
        name = text if _NAME.match(text) else keyword
        found.append(Argument(name, text or keyword, str(kind), str(keyword)))
    return found


def call_in_words(call: dict[str, Any]) -> str:
    """``the state (a tensor), attention_mask=None, position_ids=an int64 tensor``."""
    parts = []
    for index, kind in enumerate(call.get("args") or []):
        parts.append(
            "the state (a tensor)"
            if index == 0
            else f"argument {index + 1} (" + describe_kind(str(kind)) + ")"
        )
    for keyword, kind in (call.get("kwargs") or {}).items():
        parts.append(f"{keyword}={describe_kind(str(kind))}")
    output = str(call.get("output") or "")
    returns = describe_kind(output) if output else "unknown"
    return f"each layer is called with {', '.join(parts) or 'nothing'} and returns {returns}"


def output_length(call: dict[str, Any]) -> int | None:
    """None for a tensor output; n for a tuple of n; 0 for anything else."""
    output = str(call.get("output") or "")
    if output == "tensor":
        return None
    if output.startswith("tuple(") and output[6:-1].split(",")[0] == "tensor":
        return len(output[6:-1].split(","))
    return 0


def blockers(call: dict[str, Any]) -> list[str]:
    """What in the call scan_layers cannot take, in words (empty: it can)."""
    found = []
    positional = call.get("args") or []
    if not positional or positional[0] != "tensor":
        found.append("the layers' first argument is not a floating-point tensor (the state)")
    for number, argument in enumerate(arguments(call), start=1):
        label = argument.keyword or f"argument {number}"
        if argument.how == "object":
            found.append(
                f"{label} is a {argument.kind}, a Python object every layer shares"
                + (" (a key-value cache: use_cache=False)" if "Cache" in argument.kind else "")
            )
    if output_length(call) == 0:
        found.append(f"the layers return {describe_kind(str(call.get('output')))}, not a tensor")
    return found


def simple(call: dict[str, Any]) -> bool:
    """One floating tensor in, one out: ``x = scan_layers(layers, x)`` as it stands."""
    return (
        list(call.get("args") or []) == ["tensor"]
        and not call.get("kwargs")
        and call.get("output") == "tensor"
    )


def carry_rewrite(
    call: dict[str, Any],
    source: LoopCall | None,
    stack: str,
    unit: str,
    owner: str | None,
    loop_line: int | None,
) -> tuple[str, list[str]] | None:
    """The wrapper and the replacement of the loop, and the outputs it drops (their names).

    None when the call has an argument that cannot be carried (see ``blockers``) or an
    integer tensor (scan's carry must be floating point).
    """
    found = arguments(call, source)
    if blockers(call) or any(a.how in ("object", "integer") for a in found):
        return None
    if source is None and any(a.how == "fixed" for a in found):
        return None  # a fixed value's expression is only in the loop's text
    carried = [a for a in found if a.how == "carry"]
    state = carried[0].name
    names = [a.name for a in carried]
    call_parts = []
    for argument in found:
        value = argument.name if argument.how == "carry" else argument.text
        call_parts.append(value if argument.keyword is None else f"{argument.keyword}={value}")
    length = output_length(call)
    targets = source.targets if source is not None else ()
    dropped: list[str] = []
    if length is None:
        assign = f"{state} = self.layer({', '.join(call_parts)})"
    elif len(targets) == length:
        assign = f"{', '.join(targets)} = self.layer({', '.join(call_parts)})"
        state = targets[0]
        dropped = list(targets[1:])
    else:
        assign = f"{state} = self.layer({', '.join(call_parts)})[0]"
        dropped = [f"output {n + 2}" for n in range(length - 1)]
    back = ", ".join([state, *names[1:]])
    carry = state if len(names) == 1 else f"({back})"
    result = state if len(names) == 1 else f"{state}, *_"
    where = f" at line {loop_line}" if loop_line is not None else ""
    method = f"in {owner}.forward, " if owner else ""
    code = (
        "    from torch import nn\n"
        "    from torch_xla.experimental.scan_layers import scan_layers\n\n"
        "    class CarryArgs(nn.Module):\n"
        f'        """One {unit}, taking and returning the whole carry ({back})."""\n\n'
        "        def __init__(self, layer):\n"
        "            super().__init__()\n"
        "            self.layer = layer\n\n"
        f"        def forward(self, {', '.join(names)}):\n"
        f"            {assign}\n"
        f"            return {back}\n\n"
        f"    # {method}instead of the loop{where}:\n"
        f"    {result} = scan_layers([CarryArgs(layer) for layer in {stack}], {carry})\n"
    )
    return code, dropped
