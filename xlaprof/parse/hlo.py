"""HLO text (XLA's ``before_optimizations`` dump) to typed instructions.

Only the ENTRY computation is read: it is the graph torch_xla built from the user's ops, in the
order they were traced (parameters appear where first used). With ``XLA_HLO_DEBUG=1`` each
instruction carries ``op_type`` (the aten op), ``op_name`` and ``source_file``/``source_line``
(the innermost Python frame that created it), which is how findings reach the user's lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_INSTRUCTION_RE = re.compile(
    r"^\s*(?:ROOT\s+)?%(?P<name>[\w.\-]+)\s*=\s*(?P<shape>.+?)\s+(?P<opcode>[a-z][\w\-]*)\((?P<rest>.*)$"
)
_METADATA_RE = re.compile(r"metadata=\{(?P<body>[^}]*)\}")
_META_FIELD_RE = re.compile(r'(\w+)=(?:"((?:[^"\\]|\\.)*)"|(\S+))')
_PARAMETER_INDEX_RE = re.compile(r"^(\d+)\)")
_LAYOUT_RE = re.compile(r"\{[^{}]*\}")
_ENTRY_RE = re.compile(r"^ENTRY\s+%(?P<name>[\w.\-]+)")
_MAX_LITERAL = 64
_DIMS_RE = re.compile(r"^(?P<dtype>[a-z]+\d*)\[(?P<dims>[^\]]*)\]")


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
            value = rest.partition(")")[0].strip()
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
            )
        )
    return module
