"""The source of each compiled HLO instruction, from the HLO protos a capture embeds.

Every XSpace capture here (TPU, GPU, JAX on CPU, torch_xla) carries its programs' optimized HLO
modules: plane ``/host:metadata``, one event metadata per program (named ``jit_f(<program
id>)`` or by its module), stat ``Hlo Proto`` holding a serialized ``xla.HloProto``. Each
instruction's ``OpMetadata`` says where it came from: ``op_type``/``op_name`` (the framework op,
e.g. ``aten__addmm`` or ``jit(f)/jit(main)/dot_general``), ``source_file``/``source_line`` (the
innermost frame) and ``stack_frame_id``, the whole Python stack in the module's
``stack_frame_index``.

Only the fields used are declared, in a schema built at run time with ``google.protobuf``'s
descriptor API as ``xlaprof.parse.xplane.schema`` builds XSpace's (no XLA or JAX needed;
unknown fields are skipped by the protobuf runtime). Field numbers are those of the public
``xla/service/hlo.proto`` and ``xla/xla_data.proto``:

- ``HloProto.hlo_module`` 1 -> ``HloModuleProto``: ``name`` 1, ``computations`` 3, ``id`` 5,
  ``stack_frame_index`` 17.
- ``HloComputationProto``: ``name`` 1, ``instructions`` 2, ``id`` 5.
- ``HloInstructionProto``: ``name`` 1, ``opcode`` 2, ``metadata`` 7, ``id`` 35,
  ``called_computation_ids`` 38.
- ``OpMetadata``: ``op_type`` 1, ``op_name`` 2, ``source_file`` 3, ``source_line`` 4,
  ``stack_frame_id`` 15.
- ``StackFrameIndexProto``: ``file_names`` 1, ``function_names`` 2, ``file_locations`` 3
  (``file_name_id`` 1, ``function_name_id`` 2, ``line`` 3), ``stack_frames`` 4
  (``file_location_id`` 1, ``parent_frame_id`` 2); ids count from 1, 0 is "none".

``instruction_sources`` gives one row per instruction: module, program id, instruction, opcode,
op type and name, the innermost frame, and the innermost frame in the user's code (the stack
walked outward until a file that ``is_library_file`` does not call a library: not
site-packages, torch, jax's installed files or the standard library). A fusion or a wrapper
(``call``, ``while``) whose own metadata names no line takes the line most of the instructions
it calls carry; an instruction with no line inside a computation that a caller with a line
calls (a copy in a loop body) takes its caller's.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from xlaprof.parse.frames import Frame, is_library_file

# The metadata plane and the stat that holds a program's HloProto (``StatType::kHloProto``:
# "Hlo Proto" in the captures here, "hlo_proto" as XProf's converter may name it).
METADATA_PLANE = "/host:metadata"
HLO_PROTO_STATS = ("Hlo Proto", "hlo_proto")

SOURCE_COLUMNS = [
    "module",
    "program_id",
    "instruction",
    "opcode",
    "op_type",
    "op_name",
    "source_file",
    "source_line",
    "user_file",
    "user_line",
    "user_function",
]


@dataclass(frozen=True)
class InstructionSource:
    """Where one HLO instruction came from (a row of ``SOURCE_COLUMNS``)."""

    module: str
    program_id: str | None
    instruction: str
    opcode: str
    op_type: str | None
    op_name: str | None
    source_file: str | None
    source_line: int | None
    user_file: str | None
    user_line: int | None
    user_function: str | None


@functools.cache
def hlo_proto_class() -> Any:
    """The ``HloProto`` message class, with only the fields this module reads."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    optional, repeated = field.LABEL_OPTIONAL, field.LABEL_REPEATED
    proto = descriptor_pb2.FileDescriptorProto(
        name="xlaprof_hlo.proto", package="xlaprof.hlo", syntax="proto3"
    )

    def message(name: str, fields: list[tuple[Any, ...]]) -> None:
        described = proto.message_type.add(name=name)
        for fname, number, ftype, *rest in fields:
            label = rest[0] if rest else optional
            added = described.field.add(name=fname, number=number, type=ftype, label=label)
            if len(rest) > 1:
                added.type_name = f".xlaprof.hlo.{rest[1]}"

    message(
        "OpMetadata",
        [
            ("op_type", 1, field.TYPE_STRING),
            ("op_name", 2, field.TYPE_STRING),
            ("source_file", 3, field.TYPE_STRING),
            ("source_line", 4, field.TYPE_INT32),
            ("stack_frame_id", 15, field.TYPE_INT32),
        ],
    )
    message(
        "HloInstructionProto",
        [
            ("name", 1, field.TYPE_STRING),
            ("opcode", 2, field.TYPE_STRING),
            ("metadata", 7, field.TYPE_MESSAGE, optional, "OpMetadata"),
            ("id", 35, field.TYPE_INT64),
            ("called_computation_ids", 38, field.TYPE_INT64, repeated),
        ],
    )
    message(
        "HloComputationProto",
        [
            ("name", 1, field.TYPE_STRING),
            ("instructions", 2, field.TYPE_MESSAGE, repeated, "HloInstructionProto"),
            ("id", 5, field.TYPE_INT64),
        ],
    )
    message(
        "FileLocation",
        [
            ("file_name_id", 1, field.TYPE_INT32),
            ("function_name_id", 2, field.TYPE_INT32),
            ("line", 3, field.TYPE_INT32),
        ],
    )
    message(
        "StackFrame",
        [("file_location_id", 1, field.TYPE_INT32), ("parent_frame_id", 2, field.TYPE_INT32)],
    )
    message(
        "StackFrameIndexProto",
        [
            ("file_names", 1, field.TYPE_STRING, repeated),
            ("function_names", 2, field.TYPE_STRING, repeated),
            ("file_locations", 3, field.TYPE_MESSAGE, repeated, "FileLocation"),
            ("stack_frames", 4, field.TYPE_MESSAGE, repeated, "StackFrame"),
        ],
    )
    message(
        "HloModuleProto",
        [
            ("name", 1, field.TYPE_STRING),
            ("computations", 3, field.TYPE_MESSAGE, repeated, "HloComputationProto"),
            ("id", 5, field.TYPE_INT64),
            ("stack_frame_index", 17, field.TYPE_MESSAGE, optional, "StackFrameIndexProto"),
        ],
    )
    message("HloProto", [("hlo_module", 1, field.TYPE_MESSAGE, optional, "HloModuleProto")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("xlaprof.hlo.HloProto"))


def embedded_hlo_protos(space: Any) -> list[tuple[str, bytes]]:
    """``(event metadata name, serialized HloProto)`` for each program ``space`` embeds."""
    found = []
    for plane in space.planes:
        if plane.name != METADATA_PLANE:
            continue
        names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        for meta in plane.event_metadata.values():
            for stat in meta.stats:
                if names.get(stat.metadata_id) in HLO_PROTO_STATS and stat.bytes_value:
                    found.append((meta.name, bytes(stat.bytes_value)))
    return found


def program_id_of(name: str) -> str | None:
    """``jit_f(12190760917235803885)`` -> ``12190760917235803885``; None without one."""
    if name.endswith(")") and "(" in name:
        inner = name[name.rindex("(") + 1 : -1]
        return inner if inner.isdigit() else None
    return None


def instruction_sources(
    protos: Iterable[tuple[str, bytes]], is_library: Any = is_library_file
) -> list[InstructionSource]:
    """One row per instruction of each embedded program (see the module docstring).

    A proto that does not parse is skipped: a capture's other programs still give their lines.
    ``is_library`` is asked once per distinct file (programs name the same few files thousands
    of times).
    """
    from functools import lru_cache

    from google.protobuf.message import DecodeError

    is_library = lru_cache(maxsize=None)(is_library)
    cls = hlo_proto_class()
    rows: list[InstructionSource] = []
    for name, data in protos:
        proto = cls()
        try:
            proto.ParseFromString(data)
        except DecodeError:
            continue
        rows.extend(_module_rows(proto.hlo_module, program_id_of(name), is_library))
    return rows


def _module_rows(module: Any, program_id: str | None, is_library: Any) -> list[InstructionSource]:
    frames = StackFrames(module.stack_frame_index)
    rows: dict[int, InstructionSource] = {}
    called: dict[int, list[int]] = {}
    computation_rows: dict[int, list[int]] = {}
    for computation in module.computations:
        mine = computation_rows.setdefault(computation.id, [])
        for inst in computation.instructions:
            serial = len(rows)
            rows[serial] = _instruction_row(inst, module.name, program_id, frames, is_library)
            called[serial] = list(inst.called_computation_ids)
            mine.append(serial)
    _lines_from_callees(rows, called, computation_rows)
    _lines_from_callers(rows, called, computation_rows)
    return list(rows.values())


def _lines_from_callees(
    rows: dict[int, InstructionSource],
    called: dict[int, list[int]],
    computation_rows: dict[int, list[int]],
) -> None:
    """A fusion or wrapper without a user line of its own takes the line most of what it
    calls has (in place)."""
    for index, callees in called.items():
        row = rows[index]
        if row.user_file is not None or not callees:
            continue
        votes: Counter[tuple[str, int | None, str | None]] = Counter()
        for inner in _called_rows(callees, called, computation_rows):
            got = rows[inner]
            if got.user_file is not None:
                votes[(got.user_file, got.user_line, got.user_function)] += 1
        if votes:
            (file, line, function), _ = votes.most_common(1)[0]
            rows[index] = InstructionSource(
                **{**row.__dict__, "user_file": file, "user_line": line, "user_function": function}
            )


def _lines_from_callers(
    rows: dict[int, InstructionSource],
    called: dict[int, list[int]],
    computation_rows: dict[int, list[int]],
) -> None:
    """An instruction with no line inside a computation its caller has one for (a copy in a
    while loop's body, a compiler-made clone) takes the caller's line (in place)."""
    for index, callees in called.items():
        caller = rows[index]
        if caller.user_file is None:
            continue
        for inner in _called_rows(callees, called, computation_rows):
            if rows[inner].user_file is None:
                rows[inner] = InstructionSource(
                    **{
                        **rows[inner].__dict__,
                        "user_file": caller.user_file,
                        "user_line": caller.user_line,
                        "user_function": caller.user_function,
                    }
                )


def _instruction_row(
    inst: Any, module: str, program_id: str | None, frames: StackFrames, is_library: Any
) -> InstructionSource:
    """One instruction's row: its own source line (else its innermost frame's) and the user's
    line (the innermost frame outside installed packages, else its own line if that is the
    user's)."""
    meta = inst.metadata
    source_file = meta.source_file or None
    source_line = meta.source_line or None
    user = frames.user(meta.stack_frame_id, is_library) if meta.stack_frame_id else None
    if user is None and source_file and not is_library(source_file):
        user = Frame("", source_file, source_line)
    if source_file is None and meta.stack_frame_id:
        innermost = frames.frame(meta.stack_frame_id)
        if innermost is not None:
            source_file, source_line = innermost.file, innermost.line
    return InstructionSource(
        module=module,
        program_id=program_id,
        instruction=inst.name,
        opcode=inst.opcode,
        op_type=meta.op_type or None,
        op_name=meta.op_name or None,
        source_file=source_file,
        source_line=source_line,
        user_file=None if user is None else user.file,
        user_line=None if user is None else user.line,
        user_function=None if user is None else user.function or None,
    )


def _called_rows(
    callees: list[int], called: dict[int, list[int]], computation_rows: dict[int, list[int]]
) -> Iterator[int]:
    """The rows of every instruction in ``callees`` and in what they call in turn, each
    computation once (depth first, as a stack)."""
    pending = list(callees)
    seen: set[int] = set()
    while pending:
        computation = pending.pop()
        if computation in seen:
            continue
        seen.add(computation)
        for inner in computation_rows.get(computation, []):
            yield inner
            pending.extend(called.get(inner, []))


class StackFrames:
    """A module's stack frame index (``HloModuleProto.stack_frame_index``): a frame id's own
    frame, its whole stack innermost first, and the user's frame in it (``parse.frames.Frame``:
    ``function`` is "" where the index names none, ``file`` "" where it names no file).

    Ids count from 1 and an id out of range is no frame. A corrupt index whose parents loop is
    cut where the loop closes, or after ``MAX_DEPTH`` frames. Shared by the capture's HLO
    (``instruction_sources``) and a run's graphs (``parse/hlo.py::with_stacks``).
    """

    MAX_DEPTH = 1000

    def __init__(self, index: Any) -> None:
        self.files = list(index.file_names)
        self.functions = list(index.function_names)
        self.locations = [
            (loc.file_name_id, loc.function_name_id, loc.line) for loc in index.file_locations
        ]
        self.parents = [
            (frame.file_location_id, frame.parent_frame_id) for frame in index.stack_frames
        ]
        self._stacks: dict[int, tuple[Frame, ...]] = {}
        self._users: dict[tuple[int, Any], Frame | None] = {}

    def frame(self, frame_id: int) -> Frame | None:
        """Frame ``frame_id`` alone, or None."""
        if not 0 < frame_id <= len(self.parents):
            return None
        location_id = self.parents[frame_id - 1][0]
        if not 0 < location_id <= len(self.locations):
            return None
        file_id, function_id, line = self.locations[location_id - 1]
        file = self.files[file_id - 1] if 0 < file_id <= len(self.files) else ""
        function = self.functions[function_id - 1] if 0 < function_id <= len(self.functions) else ""
        return Frame(function, file, line or None)

    def stack(self, frame_id: int) -> tuple[Frame, ...]:
        """Frame ``frame_id`` and its parents' frames, innermost first (each id's stack is
        built once and shared by the frames below it)."""
        chain: list[int] = []
        seen: set[int] = set()
        current = frame_id
        while 0 < current <= len(self.parents) and current not in self._stacks:
            if len(chain) >= self.MAX_DEPTH or current in seen:
                break
            chain.append(current)
            seen.add(current)
            current = self.parents[current - 1][1]
        tail = self._stacks.get(current, ())
        for node in reversed(chain):
            frame = self.frame(node)
            tail = ((frame,) if frame is not None else ()) + tail
            self._stacks[node] = tail
        return self._stacks.get(frame_id, ())

    def user(self, frame_id: int, is_library: Any) -> Frame | None:
        """The innermost frame of ``frame_id``'s stack in the user's code, or None (found once
        per frame id and ``is_library``: a module's instructions share their stacks)."""
        key = (frame_id, is_library)
        if key not in self._users:
            stack = self.stack(frame_id)
            self._users[key] = next((f for f in stack if f.file and not is_library(f.file)), None)
        return self._users[key]
