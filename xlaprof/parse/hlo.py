"""HLO text (XLA's ``before_optimizations`` dump) to typed instructions.

Only the ENTRY computation is read: it is the graph torch_xla built from the user's ops, in the
order they were traced (parameters appear where first used). With ``XLA_HLO_DEBUG=1`` each
instruction carries ``op_type`` (the aten op), ``op_name`` and ``source_file``/``source_line``
(the innermost Python frame that created it), which is how findings reach the user's lines.

Each instruction also keeps its attributes (``slice={[0:10]}``, ``dimensions={1}``, ...) with the
names of called computations stripped of their serial numbers, so two graphs' ops can be
compared for more than opcode and shape: slice bounds or an iota's size baked in from a Python
number differ only there. ``with_stacks`` adds each instruction's innermost *user* frame from the
module's HloProto (``parse/hlo_sources.py``): the text names an op's innermost frame only, often
inside torch or a library.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from xlaprof.parse.frames import Frame

_INSTRUCTION_RE = re.compile(
    r"^\s*(?:ROOT\s+)?%(?P<name>[\w.\-]+)\s*=\s*(?P<shape>.+?)\s+(?P<opcode>[a-z][\w\-]*)\((?P<rest>.*)$"
)
_METADATA_RE = re.compile(r"metadata=\{(?P<body>[^{}]*)\}")
_META_FIELD_RE = re.compile(r'\b(\w+)=(?:"((?:[^"\\]|\\.)*)"|(\S+))')
_PARAMETER_INDEX_RE = re.compile(r"^(\d+)\)")
_LAYOUT_RE = re.compile(r"\{[^{}]*\}")
_ENTRY_RE = re.compile(r"^ENTRY\s+%(?P<name>[\w.\-]+)")
_MAX_LITERAL = 64
_DIMS_RE = re.compile(r"^(?P<dtype>[a-z]+\d*)\[(?P<dims>[^\]]*)\]")
# Attributes that say nothing about what an op computes: where it came from and how it is laid
# out or placed.
_IGNORED_ATTRIBUTES = frozenset(
    {"metadata", "frontend_attributes", "sharding", "backend_config", "statistics_viz"}
)
_COMPUTATION_REF_RE = re.compile(r"(%[A-Za-z_][\w\-]*?)\.\d+\b")


@dataclass(frozen=True)
class Instruction:
    """One HLO instruction of the entry computation."""

    index: int
    name: str
    opcode: str
    shape: str  # without layout, e.g. "f32[8,32]" or "(f32[2], s32[])"
    op_type: str | None = None
    op_name: str | None = None
    source_file: str | None = None
    source_line: int | None = None
    parameter: int | None = None  # parameter number, for opcode == "parameter"
    literal: str | None = None  # a constant's value, when short (a Python number baked in)
    # what the op computes beyond opcode and shape: "slice={[0:10]}, dimensions={0}" (called
    # computations by name without serial number); None when it has none
    attributes: str | None = None
    # the innermost frame of the op's Python stack in the user's code (from the HloProto's stack
    # frame index: see ``with_stacks``); None when the proto was not kept or had no stacks
    user_file: str | None = None
    user_line: int | None = None
    user_function: str | None = None
    # the whole Python stack, innermost first (function "" where the index names none); None as
    # above
    stack: tuple[Frame, ...] | None = None

    @property
    def signature(self) -> str:
        """What makes two instructions the same operation: opcode and result shape."""
        return f"{self.opcode}:{self.shape}"

    @property
    def dims(self) -> tuple[str, tuple[int, ...]] | None:
        """(dtype, dimensions) of an array shape; None for tuples and tokens."""
        match = _DIMS_RE.match(self.shape)
        if not match:
            return None
        dims = match.group("dims")
        try:
            return match.group("dtype"), tuple(int(d) for d in dims.split(",") if d)
        except ValueError:  # dynamic dimensions print as "<=8"
            return None


@dataclass
class HloModule:
    """The entry computation of one compiled module."""

    name: str
    instructions: list[Instruction] = field(default_factory=list)

    @property
    def parameters(self) -> list[Instruction]:
        return sorted(
            (i for i in self.instructions if i.opcode == "parameter"),
            key=lambda i: i.parameter if i.parameter is not None else -1,
        )

    @property
    def op_count(self) -> int:
        """Instructions that compute something (not parameters or constants)."""
        return sum(1 for i in self.instructions if i.opcode not in ("parameter", "constant"))


# The characters the bracket walks below act on. The regex engine skips the text between them,
# so an attribute list kilobytes long costs a few Python steps per bracket, not per character.
_BRACKETS_OR_COMMA_RE = re.compile(r'["(){}\[\],]')


def _unquoted(text: str, start: int = 0) -> Iterator[tuple[str, int]]:
    """Each bracket or comma of ``text`` from ``start`` outside its quoted strings, with its
    index (a ``"`` escaped by the character before it opens or closes nothing)."""
    quoted = False
    for match in _BRACKETS_OR_COMMA_RE.finditer(text, start):
        char, index = match.group(), match.start()
        if char == '"':
            if index == 0 or text[index - 1] != "\\":
                quoted = not quoted
        elif not quoted:
            yield char, index


def closing_bracket(text: str, start: int = 0) -> int:
    """Index of the bracket that closes the one opened just before ``start`` (or len)."""
    depth = 1
    for char, index in _unquoted(text, start):
        if char in "({[":
            depth += 1
        elif char in ")}]":
            depth -= 1
            if depth == 0:
                return index
    return len(text)


def split_top_level(text: str) -> list[str]:
    """``a={x, y}, b=2`` -> ``["a={x, y}", "b=2"]``: commas outside brackets and quotes."""
    parts: list[str] = []
    depth, begin = 0, 0
    for char, index in _unquoted(text):
        if char in "({[":
            depth += 1
        elif char in ")}]":
            depth -= 1
        elif depth == 0:
            parts.append(text[begin:index].strip())
            begin = index + 1
    if text[begin:].strip():
        parts.append(text[begin:].strip())
    return parts


def _attributes(after_operands: str) -> str | None:
    """The op's attributes that matter for what it computes, normalized (see the docstring)."""
    kept = []
    for part in split_top_level(after_operands):
        name = part.partition("=")[0].strip()
        if not name or name in _IGNORED_ATTRIBUTES:
            continue
        kept.append(_COMPUTATION_REF_RE.sub(r"\1", part))
    return ", ".join(kept) or None


def _strip_layout(shape: str) -> str:
    previous = None
    while previous != shape:
        previous, shape = shape, _LAYOUT_RE.sub("", shape)
    return shape.replace("/*index=", "").strip()


def parse_hlo(text: str) -> HloModule:
    """Parse the ENTRY computation of an HLO module's text. Unknown lines are skipped."""
    module = HloModule(name="")
    in_entry = False
    for line in text.splitlines():
        if not in_entry:
            match = _ENTRY_RE.match(line)
            if match:
                module.name = match.group("name")
                in_entry = True
            continue
        if line.startswith("}"):
            break
        match = _INSTRUCTION_RE.match(line)
        if not match:
            continue
        rest = match.group("rest")
        operands_end = closing_bracket(rest)
        meta: dict[str, str] = {}
        metadata = _METADATA_RE.search(rest)
        if metadata:
            for key, quoted, bare in _META_FIELD_RE.findall(metadata.group("body")):
                meta[key] = quoted if quoted else bare
        parameter = None
        opcode = match.group("opcode")
        if opcode == "parameter":
            number = _PARAMETER_INDEX_RE.match(rest)
            parameter = int(number.group(1)) if number else None
        literal = None
        if opcode == "constant":
            value = rest[:operands_end].strip()
            literal = value if len(value) <= _MAX_LITERAL else None
        source_line = meta.get("source_line")
        module.instructions.append(
            Instruction(
                index=len(module.instructions),
                name=match.group("name"),
                opcode=opcode,
                shape=_strip_layout(match.group("shape")),
                op_type=meta.get("op_type"),
                op_name=meta.get("op_name"),
                source_file=meta.get("source_file"),
                source_line=int(source_line) if source_line and source_line.isdigit() else None,
                parameter=parameter,
                literal=literal,
                attributes=_attributes(rest[operands_end + 1 :]),
            )
        )
    return module


def with_stacks(module: HloModule, proto: bytes) -> HloModule:
    """``module`` with each instruction's Python stack from its serialized HloProto.

    The proto is the same module (``--xla_dump_hlo_as_proto`` beside the text dump): its
    instructions have the same names. Each instruction's ``OpMetadata.stack_frame_id`` points into
    the module's stack frame index (``parse/hlo_sources.py`` declares the fields); the chain of
    parents is its stack, innermost first. A proto that does not decode, or has no stacks (IR
    debug was off while the graph was traced), leaves ``module`` as it was.
    """
    from dataclasses import replace

    from google.protobuf.message import DecodeError

    from xlaprof.parse.frames import is_library_file
    from xlaprof.parse.hlo_sources import StackFrames, hlo_proto_class

    message = hlo_proto_class()()
    try:
        message.ParseFromString(proto)
    except DecodeError:
        return module
    stacks = StackFrames(message.hlo_module.stack_frame_index)
    by_name: dict[str, tuple[Frame, ...]] = {}
    for computation in message.hlo_module.computations:
        for instruction in computation.instructions:
            frame_id = instruction.metadata.stack_frame_id
            if frame_id:
                by_name[instruction.name] = stacks.stack(frame_id)
    if not by_name:
        return module
    updated = []
    for instruction in module.instructions:
        stack = by_name.get(instruction.name)
        if not stack:
            updated.append(instruction)
            continue
        user = next((f for f in stack if f.file and not is_library_file(f.file)), None)
        updated.append(
            replace(
                instruction,
                stack=stack,
                user_file=None if user is None else user.file,
                user_line=None if user is None else user.line,
                user_function=None if user is None else user.function or None,
            )
        )
    module.instructions = updated
    return module
