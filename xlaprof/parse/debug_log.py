"""Parser for torch_xla's debug output: PT_XLA_DEBUG_LEVEL analysis and older profiler lines.

Three formats, all of which can be mixed into one training log:

* ``Compilation Analysis:`` / ``Execution Analysis:`` / ``Post Compilation Analysis:`` blocks
  (PT_XLA_DEBUG_LEVEL >= 1, torch_xla 2.x): cause, graph hash, graph inputs/outputs and the
  python frames that triggered the graph; post-compilation memory sizes.
* ``pt-xla-profiler:`` lines (PT_XLA_DEBUG=1, 1.x era and still printed by 2.x):
  ``X too frequent: C counts during S steps``, ``Op(s) not lowered: aten::a, ...``, and the
  ``Unlowered Op usage summary`` made of ``FRAME (count=N):`` groups.
* The fallback tracker's raw records (``XLA_FNTRACKER_FILE``): ``[TAG xla_fallback From Thread
  N]`` with the python frames and the C++ frames naming the op (``at::_ops::median::call``).

Blocks that are cut off (a crashed job, a truncated file) are kept and flagged ``truncated``.
Nothing here raises on malformed input.

The three formats interleave in one log, line by line, so one state machine reads them all,
with their record types beside it; a frame and how it is read are ``xlaprof.parse.frames``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from xlaprof.parse.frames import Frame, parse_frame
from xlaprof.parse.metrics_report import ParseWarning
from xlaprof.parse.units import parse_quantity

EventKind = Literal["compilation", "execution"]

_PREFIX_RE = re.compile(
    r"(Post Compilation Analysis|Compilation Analysis|Execution Analysis):[ \t]?(.*)$"
)
_HASH_RE = re.compile(r"Graph Hash:\s*(\S+)")
_INPUTS_RE = re.compile(r"Number of Graph Inputs?:\s*(\d+)")
_OUTPUTS_RE = re.compile(r"Number of Graph Outputs?:\s*(\d+)")
_SIZE_RE = re.compile(r"^\s*(\S.*?) size:\s*([\d.]+)\s*(B|KB|MB|GB|TB)\s*$")
_PROFILER_RE = re.compile(r"pt-xla-profiler:[ \t]?(.*)$")
_TOO_FREQUENT_RE = re.compile(r"\b(\w+) too frequent: (\d+) counts during (\d+) steps")
_NOT_LOWERED_RE = re.compile(r"Op\(s\) not lowered:\s*(.*?)(?:\s*Please open.*)?$")
_NAMESPACED_OP_RE = re.compile(r"\b([A-Za-z_]\w*::\w+(?:\.\w+)?)")
_FRAME_GROUP_RE = re.compile(r"FRAME \(count=(\d+)\):")
_UNLOWERED_RE = re.compile(r'Unlowered Op:\s*"([^"]*)"')
# The tag is an op name: it crosses no bracket and ends in a non-space, so neither another
# "[TAG" nor a run of spaces is scanned again from each position (quadratic).
_TAG_RE = re.compile(r"\[TAG\s+(\S(?:[^\[\]]*?\S)?)\s+From Thread\s+\d+\]")
_CPP_OP_RE = re.compile(r"at::_ops::(\w+)::call\b")


@dataclass
class MemoryAnalysis:
    """Post-compilation sizes of one graph, in bytes."""

    input_bytes: float | None = None
    output_bytes: float | None = None
    aliased_input_bytes: float | None = None
    intermediate_bytes: float | None = None
    program_bytes: float | None = None


@dataclass
class DebugEvent:
    """One Compilation or Execution Analysis block."""

    kind: EventKind
    cause: str | None = None
    graph_hash: str | None = None
    graph_inputs: int | None = None
    graph_outputs: int | None = None
    frames: list[Frame] = field(default_factory=list)
    memory: MemoryAnalysis | None = None
    line: int = 0
    truncated: bool = False
    step: int | None = None  # known when recorded by xlaprof run/profile

    def record(self) -> dict[str, Any]:
        """The event as plain data: the ``debug_events`` entry of the JSON contract.

        The one way an event becomes a row: the JSON document, ``events.jsonl`` and the
        notebook DataFrames all start from this.
        """
        return {
            "kind": self.kind,
            "cause": self.cause,
            "graph_hash": self.graph_hash,
            "graph_inputs": self.graph_inputs,
            "graph_outputs": self.graph_outputs,
            "frames": [
                {"function": f.function, "file": f.file, "line": f.line} for f in self.frames
            ],
            "memory": None if self.memory is None else asdict(self.memory),
            "step": self.step,
            "truncated": self.truncated,
        }


@dataclass(frozen=True)
class TooFrequent:
    """``pt-xla-profiler: CompileTime too frequent: 21 counts during 11 steps``."""

    metric: str
    count: int
    steps: int
    line: int


@dataclass
class FallbackRecord:
    """Ops run on the CPU, with the python frames that ran them, if known.

    From the fallback tracker (op named, count 1 per record) or from the profiler's
    ``Unlowered Op usage summary`` (``FRAME (count=N)`` groups) or ``Op(s) not lowered`` lines.
    Such a line has no frame and counts no calls: torch_xla prints it at every sync from the
    op's first fallback on (measured on 2.9: an op used in steps 1 and 2 of 6 is named in 5
    lines), so its records are ``listed``, each standing for one line, not one call.
    """

    op: str | None
    count: int
    frames: list[Frame] = field(default_factory=list)
    line: int = 0
    step: int | None = None  # known when recorded by xlaprof run/profile
    listed: bool = False  # from an "Op(s) not lowered" line: count is lines, not calls


@dataclass
class DebugLog:
    """Everything found in one debug text."""

    events: list[DebugEvent] = field(default_factory=list)
    too_frequent: list[TooFrequent] = field(default_factory=list)
    fallbacks: list[FallbackRecord] = field(default_factory=list)
    warnings: list[ParseWarning] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.events or self.too_frequent or self.fallbacks)

    def compilations(self) -> list[DebugEvent]:
        return [e for e in self.events if e.kind == "compilation"]

    def executions(self) -> list[DebugEvent]:
        return [e for e in self.events if e.kind == "execution"]

    def merge(self, other: DebugLog) -> None:
        """Append everything ``other`` found (the one place debug logs are merged)."""
        self.events.extend(other.events)
        self.too_frequent.extend(other.too_frequent)
        self.fallbacks.extend(other.fallbacks)
        self.warnings.extend(other.warnings)


def _aten(op: str) -> str:
    """Op names as the metrics counters spell them: ``aten::median``."""
    return op if "::" in op else f"aten::{op}"


def _graph_info(event: DebugEvent, text: str) -> bool:
    """Read a graph hash or a count of graph inputs or outputs into ``event``; whether ``text``
    held one."""
    if (match := _HASH_RE.search(text)) is not None:
        event.graph_hash = match.group(1)
    elif (match := _INPUTS_RE.search(text)) is not None:
        event.graph_inputs = int(match.group(1))
    elif (match := _OUTPUTS_RE.search(text)) is not None:
        event.graph_outputs = int(match.group(1))
    else:
        return False
    return True


class _BlockState:
    """An analysis block being read."""

    def __init__(self, prefix: str, lineno: int) -> None:
        self.prefix = prefix
        self.lineno = lineno
        self.section: str | None = None
        self.closing = False  # the "----" line was seen; the next "====" ends the block
        self.event: DebugEvent | None = None
        self.memory: MemoryAnalysis | None = None
        if prefix != "Post Compilation Analysis":
            kind: EventKind = "compilation" if prefix.startswith("Compilation") else "execution"
            self.event = DebugEvent(kind=kind, line=lineno)
        else:
            self.memory = MemoryAnalysis()


class _Parser:
    def __init__(self) -> None:
        self.log = DebugLog()
        self.block: _BlockState | None = None
        self.group: FallbackRecord | None = None
        self.group_frames = False
        self.tag: FallbackRecord | None = None
        self.tag_section: str | None = None

    # -- analysis blocks -------------------------------------------------------------------
    def close_block(self, truncated: bool) -> None:
        block = self.block
        self.block = None
        if block is None:
            return
        if block.event is not None:
            block.event.truncated = truncated
            self.log.events.append(block.event)
        elif block.memory is not None:
            # Post-compilation analysis belongs to the compilation just before it.
            for event in reversed(self.log.events):
                if event.kind == "compilation":
                    if event.memory is None:
                        event.memory = block.memory
                    break

    def analysis_line(self, lineno: int, prefix: str, body: str) -> None:
        stripped = body.strip()
        if stripped.startswith("====="):
            if self.block is not None and self.block.prefix == prefix and self.block.closing:
                self.close_block(truncated=False)
            else:
                if self.block is not None:
                    self.close_block(truncated=True)
                self.block = _BlockState(prefix, lineno)
            return
        if self.block is None or self.block.prefix != prefix:
            if self.block is not None:
                self.close_block(truncated=True)
            # A block whose opening line was lost: start one anyway, keep what follows.
            self.block = _BlockState(prefix, lineno)
        block = self.block
        if stripped.startswith("-----"):
            block.closing = True
        elif block.memory is not None:
            self.memory_line(lineno, block.memory, body)
        else:
            self.event_line(lineno, block, body)

    def event_line(self, lineno: int, block: _BlockState, body: str) -> None:
        """A line of a compilation or execution block: a section's title, or what it holds."""
        event = block.event
        assert event is not None  # a block that is not post-compilation analysis has one
        stripped = body.strip()
        if stripped in ("Compilation Cause", "Execution Cause"):
            block.section = "cause"
        elif stripped.startswith("Graph Info"):
            block.section = "graph"
        elif stripped.startswith("Python Frame Triggered Execution"):
            block.section = "frames"
        elif not stripped:
            return
        elif block.section == "cause":
            event.cause = stripped if event.cause is None else f"{event.cause} {stripped}"
        elif _graph_info(event, stripped):
            return
        elif block.section == "frames":
            frame = parse_frame(body)
            if frame is None:
                self.warn(lineno, body, "unreadable python frame")
            else:
                event.frames.append(frame)
        else:
            self.warn(lineno, body, f"unexpected line in {block.prefix}")

    def memory_line(self, lineno: int, memory: MemoryAnalysis, body: str) -> None:
        if "Unknown" in body:
            return  # torch_xla prints "Unknown" when XLA reported no such size.
        match = _SIZE_RE.match(body)
        if not match:
            if body.strip():
                self.warn(lineno, body, "unexpected line in Post Compilation Analysis")
            return
        label = match.group(1).strip().lower()
        try:
            value, _unit = parse_quantity(match.group(2) + match.group(3))
        except ValueError:
            self.warn(lineno, body, "unreadable size")
            return
        attribute = {
            "graph input": "input_bytes",
            "graph output": "output_bytes",
            "aliased input": "aliased_input_bytes",
            "intermediate tensor": "intermediate_bytes",
            "compiled program": "program_bytes",
        }.get(label)
        if attribute is None:
            self.warn(lineno, body, f"unknown size {label!r}")
        else:
            setattr(memory, attribute, value)

    # -- pt-xla-profiler lines -------------------------------------------------------------
    def profiler_line(self, lineno: int, body: str) -> None:
        if (match := _TOO_FREQUENT_RE.search(body)) is not None:
            self.log.too_frequent.append(
                TooFrequent(match.group(1), int(match.group(2)), int(match.group(3)), lineno)
            )
            return
        if self.not_lowered_line(lineno, body):
            return
        if (match := _FRAME_GROUP_RE.search(body)) is not None:
            self.end_group()
            self.group = FallbackRecord(op=None, count=int(match.group(1)), line=lineno)
            self.group_frames = False
            return
        if self.group is None:
            return
        if (match := _UNLOWERED_RE.search(body)) is not None:
            # "xla_fallback" is the tracker's generic tag: the op itself is not named.
            op = match.group(1)
            self.group.op = None if op == "xla_fallback" else _aten(op)
        elif body.strip().startswith("Python Frames"):
            self.group_frames = True
        elif body.strip().startswith("====="):
            self.end_group()
        elif (frame := parse_frame(body)) is not None:
            self.group.frames.append(frame)

    def not_lowered_line(self, lineno: int, text: str) -> bool:
        """``Op(s) not lowered: aten::a, aten::b`` anywhere in a line; False if absent."""
        match = _NOT_LOWERED_RE.search(text)
        if match is None:
            return False
        rest = match.group(1)
        ops = _NAMESPACED_OP_RE.findall(rest)
        if not ops:  # bare names: "Op(s) not lowered: multinomial, median"
            ops = [o.strip().split()[0] for o in rest.split(",") if o.strip()]
        for op in ops:
            record = FallbackRecord(op=_aten(op.rstrip(".,;")), count=1, line=lineno, listed=True)
            self.log.fallbacks.append(record)
        return True

    def end_group(self) -> None:
        if self.group is not None:
            self.log.fallbacks.append(self.group)
        self.group = None

    # -- fallback tracker records ----------------------------------------------------------
    def tracker_line(self, lineno: int, text: str) -> bool:
        """Handle a line of an ``XLA_FNTRACKER_FILE`` record; False if it is not one."""
        if (match := _TAG_RE.search(text)) is not None:
            self.end_tag()
            self.tag = FallbackRecord(op=None, count=1, line=lineno)
            self.tag_section = "head"
            tag = match.group(1)
            if tag != "xla_fallback":
                self.tag.op = tag
            return True
        if self.tag is None:
            return False
        stripped = text.strip()
        if stripped == "Frames:":
            self.tag_section = "frames"
        elif stripped == "C++ Frames:":
            self.tag_section = "cpp"
        elif stripped.startswith("*** End stack trace"):
            self.end_tag()
        elif self.tag_section == "frames" and (frame := parse_frame(text)) is not None:
            self.tag.frames.append(frame)
        elif (
            self.tag_section == "cpp"
            and self.tag.op is None
            and (match := _CPP_OP_RE.search(text)) is not None
        ):
            self.tag.op = match.group(1)
        return True

    def end_tag(self) -> None:
        if self.tag is not None:
            if self.tag.op is not None:
                self.tag.op = _aten(self.tag.op)
            self.log.fallbacks.append(self.tag)
        self.tag = None
        self.tag_section = None

    # -- driver ----------------------------------------------------------------------------
    def warn(self, lineno: int, text: str, reason: str) -> None:
        self.log.warnings.append(ParseWarning(lineno, text.strip()[:160], reason))

    def line(self, lineno: int, text: str) -> None:
        if (match := _PREFIX_RE.search(text)) is not None:
            self.analysis_line(lineno, match.group(1), match.group(2))
            return
        if (match := _PROFILER_RE.search(text)) is not None:
            self.profiler_line(lineno, match.group(1))
            return
        if self.tracker_line(lineno, text):
            return
        self.not_lowered_line(lineno, text)

    def finish(self) -> DebugLog:
        if self.block is not None:
            self.close_block(truncated=True)
        self.end_group()
        self.end_tag()
        return self.log


def parse_debug_log(text: str | Iterable[str]) -> DebugLog:
    """Parse PT_XLA_DEBUG analysis, pt-xla-profiler lines and fallback-tracker records."""
    lines = text.splitlines() if isinstance(text, str) else text
    parser = _Parser()
    for lineno, line in enumerate(lines, start=1):
        parser.line(lineno, line.rstrip("\r\n"))
    return parser.finish()
