"""Dynamo's records of a ``torch.compile`` run (``dynamo.jsonl``) as typed objects.

Each line is one of: a ``recompile`` (dynamo's ``recompiles`` log message: the function and the
guard failures, newest cache entry first), a ``graph_break`` (its ``graph_breaks`` message: the
user's line and the reason) or a ``compile`` (dynamo's compile-end callback with its compile id
and seconds), each with the step it fell in and the user's frames on the stack (innermost
first). The messages are dynamo's own text (``TORCH_LOGS=recompiles,graph_breaks``), read here
with patterns; a message in a shape not known is kept with its text and no details.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_RECOMPILE_RE = re.compile(r"Recompiling function (\S+) in (\S+:\d+)")
_GUARD_RE = re.compile(r"^\s*-\s*(\d+/\d+):\s*(.+?)\s*$", re.MULTILINE)
_BREAK_AT_RE = re.compile(r"in user code at (\S+:\d+)")
_BREAK_REASON_RE = re.compile(r"Graph Break Reason:\s*(.+)")
# From the start of a run of spaces only: a search tried each space of a long run again.
_GUARD_COMMENT_RE = re.compile(r"(?<!\s)\s+#.*$", re.DOTALL)
_SIZE_RE = re.compile(
    r"^(tensor '([^']+)' size mismatch at index (\d+))\. expected (\d+), actual (\d+)"
)


@dataclass(frozen=True)
class SizeMismatch:
    """``tensor 'args[0]' size mismatch at index 0. expected 16, actual 12``."""

    tensor: str
    dim: int
    expected: int
    actual: int


@dataclass
class DynamoRecord:
    kind: str  # "recompile" | "graph_break" | "compile"
    step: int | None
    user_frames: list[str] = field(default_factory=list)  # "file:line", innermost first
    function: str | None = None  # recompile: the function dynamo compiles again
    code: str | None = None  # recompile: its file:line; graph_break: the line that broke
    reasons: list[str] = field(default_factory=list)  # guard failures, newest first; or reason
    compile_id: str | None = None
    seconds: float | None = None
    message: str = ""
    # The user's line dynamo itself names for this record, where it names one (a TORCH_TRACE
    # guard's ``# file:line in fn`` comment): the line a finding points at.
    site: str | None = None

    @property
    def reason(self) -> str | None:
        """The guard failure of the newest cache entry (what changed since the last compile)."""
        return self.reasons[0] if self.reasons else None

    @property
    def mismatch(self) -> SizeMismatch | None:
        match = _SIZE_RE.match(self.reason or "")
        if match is None:
            return None
        tensor, dim, expected, actual = match.group(2, 3, 4, 5)
        return SizeMismatch(tensor, int(dim), int(expected), int(actual))

    @property
    def cause(self) -> str | None:
        """The reason with the values taken out: the same for every recompile of one cause."""
        reason = self.guard
        if reason is None:
            return None
        match = _SIZE_RE.match(reason)
        if match is not None:
            return match.group(1)
        return re.sub(r"\b\d+\b", "N", reason)

    @property
    def guard(self) -> str | None:
        """The newest guard failure without the source comment dynamo may end it with
        (``scale == 2.0  # y = x * scale  # train.py:22 in step``: ``scale == 2.0``)."""
        reason = self.reason
        return None if reason is None else _GUARD_COMMENT_RE.sub("", reason).strip()


def parse_dynamo_records(rows: list[dict[str, Any]]) -> list[DynamoRecord]:
    """``dynamo.jsonl`` rows -> records; rows of unknown kinds are skipped."""
    records = []
    for row in rows:
        kind = row.get("kind")
        if kind not in ("recompile", "graph_break", "compile"):
            continue
        message = str(row.get("message") or "")
        step = row.get("step")
        record = DynamoRecord(
            kind=kind,
            step=step if isinstance(step, int) else None,
            user_frames=[str(f) for f in row.get("user_frames") or []],
            compile_id=row.get("compile_id"),
            seconds=row.get("seconds"),
            message=message,
        )
        if kind == "recompile":
            if (match := _RECOMPILE_RE.search(message)) is not None:
                record.function, record.code = match.group(1), match.group(2)
            record.reasons = [m.group(2) for m in _GUARD_RE.finditer(message)]
        elif kind == "graph_break":
            if (match := _BREAK_AT_RE.search(message)) is not None:
                record.code = match.group(1)
            if (match := _BREAK_REASON_RE.search(message)) is not None:
                record.reasons = [match.group(1).strip()]
        records.append(record)
    return records
