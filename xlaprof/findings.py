"""The ``Finding``: what every analyzer returns and every renderer shows.

A finding is a diagnosis a person can act on: a kind, a severity, a one-line title, the evidence
(numbers, so the reader can judge), where in the user's code it comes from when that is known,
and what to do about it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    """Finding kinds used across the project (the JSON ``kind`` field)."""

    RECOMPILATION = "recompilation"
    HOST_SYNC = "host_sync"
    ATEN_FALLBACK = "aten_fallback"
    TRACING_BOUND = "tracing_bound"
    UNROLLED_LOOP = "unrolled_loop"
    MEMORY_PRESSURE = "memory_pressure"
    SLOW_COMPILE = "slow_compile"
    GRAPH_BREAK = "graph_break"
    INPUT_BOUND = "input_bound"
    COLLECTIVE_BOUND = "collective_bound"
    ASYNC_WAIT = "async_wait"
    HOST_BOUND = "host_bound"
    COMPILE_IN_STEP = "compile_in_step"
    EAGER_MODE = "eager_mode"


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]


@dataclass(frozen=True)
class Location:
    """A place in the user's own source code, and what that line is to the finding (``what``:
    "the read of a device value, in evaluate()", "the loop whose body is repeated").

    ``what`` travels with the line so that every renderer (text, ``--json``, HTML, MCP) shows
    one fact; it takes no part in equality, so a line is the same place whatever is said of it.
    A finding made without it gets its kind's wording (``Finding.__post_init__``).
    """

    file: str
    line: int
    what: str = field(default="", compare=False)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def described(self) -> str:
        """``file:line (what it is)``: the line as the text renderers show it."""
        return f"{self} ({self.what})" if self.what else str(self)

    @classmethod
    def parse(cls, text: str) -> Location | None:
        """``"file:line"`` as a location; None when it has no file or no line number."""
        file, _, line = text.rpartition(":")
        return cls(file, int(line)) if file and line.isdigit() else None


# What a finding's line is, by kind, for an analyzer that says nothing more precise.
LOCATION_IS: dict[Kind, str] = {
    Kind.RECOMPILATION: "the line the recompiled graphs trace back to",
    Kind.HOST_SYNC: "the line that reads a device value on the host",
    Kind.ATEN_FALLBACK: "your call that runs the op on the CPU (most calls)",
    Kind.TRACING_BOUND: "your line that traces the most work per step",
    Kind.UNROLLED_LOOP: "where the repeated block is traced",
    Kind.MEMORY_PRESSURE: "your line that allocates the most",
    Kind.SLOW_COMPILE: "the line whose graph compiles slowly",
    Kind.GRAPH_BREAK: "the line where torch.compile breaks the graph",
    Kind.INPUT_BOUND: "your line that waits for input",
    Kind.COLLECTIVE_BOUND: "your line with the most time in collectives",
    Kind.ASYNC_WAIT: "your line with the most time waiting on the device",
    Kind.HOST_BOUND: "your line with the most host time",
    Kind.COMPILE_IN_STEP: "the line whose graph is compiled inside the step",
    Kind.EAGER_MODE: "the call that turns eager mode on",
}


@dataclass(frozen=True)
class Cost:
    """What a finding costs the run, where measured (seconds; None where not measured).

    ``per_step_s``: paid again in every step it is in (the recurring cost a fix saves each
    step: a read's wait, tracing the device waits through); ``one_time_s``: paid once, in the
    steps named (a recompile); ``run_s``: all of it over the run; ``steps``: how many steps
    paid it. ``basis`` says what was measured, in words.
    """

    per_step_s: float | None = None
    one_time_s: float | None = None
    run_s: float | None = None
    steps: int | None = None
    basis: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "per_step_s": self.per_step_s,
            "one_time_s": self.one_time_s,
            "run_s": self.run_s,
            "steps": self.steps,
            "basis": self.basis,
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Cost:
        """A cost from its JSON object (``to_json``): a saved result read back."""
        return cls(
            per_step_s=document.get("per_step_s"),
            one_time_s=document.get("one_time_s"),
            run_s=document.get("run_s"),
            steps=document.get("steps"),
            basis=str(document.get("basis") or ""),
        )


@dataclass
class Finding:
    """One diagnosis with its evidence and the fix to try; ``cost`` where it was measured."""

    kind: Kind
    severity: Severity
    title: str
    evidence: dict[str, Any] = field(default_factory=dict)
    location: Location | None = None
    suggestion: str = ""
    cost: Cost | None = None

    def __post_init__(self) -> None:
        if self.location is not None and not self.location.what:
            self.location = replace(self.location, what=LOCATION_IS.get(self.kind, ""))

    def to_json(self) -> dict[str, Any]:
        """The JSON contract's finding object (docs/json-format.md)."""
        return {
            "kind": self.kind.value,
            "severity": self.severity.value,
            "title": self.title,
            "location": (
                None
                if self.location is None
                else {
                    "file": self.location.file,
                    "line": self.location.line,
                    "what": self.location.what,
                }
            ),
            "evidence": self.evidence,
            "suggestion": self.suggestion,
            "cost": None if self.cost is None else self.cost.to_json(),
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Finding:
        """A finding from its JSON object (``to_json``): a saved result read back."""
        where = document.get("location")
        return cls(
            kind=Kind(document["kind"]),
            severity=Severity(document["severity"]),
            title=str(document["title"]),
            evidence=dict(document.get("evidence") or {}),
            location=(
                None
                if not where
                else Location(str(where["file"]), int(where["line"]), str(where.get("what") or ""))
            ),
            suggestion=str(document.get("suggestion") or ""),
            cost=None if not document.get("cost") else Cost.from_json(document["cost"]),
        )


class Coverage(StrEnum):
    """What one analyzer made of one input (``KindCoverage``)."""

    FOUND = "found"  # it found something
    NOTHING_FOUND = "nothing_found"  # it could look, and found nothing
    NOT_MEASURED = "not_measured"  # it could not look: the input lacks what it reads


@dataclass(frozen=True)
class KindCoverage:
    """Whether one finding kind was looked for: found, measured and found nothing, or not
    measured, and why not (the analyzer's own ``unmeasured``). A kind not measured has not
    been shown absent."""

    kind: Kind
    status: Coverage
    why: str | None = None

    def to_json(self) -> dict[str, Any]:
        """One entry of the ``--json`` document's ``analyzers`` list (docs/json-format.md)."""
        return {"kind": self.kind.value, "status": self.status.value, "why": self.why}

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> KindCoverage:
        """An entry of the ``analyzers`` list read back (a saved result re-renders the same)."""
        return cls(Kind(document["kind"]), Coverage(document["status"]), document.get("why"))


def merged_coverage(parts: list[list[KindCoverage]]) -> list[KindCoverage]:
    """Several parts' coverage as one (a run of several processes): a kind is found where any
    part found it, else measured where any part could look, else not measured (each part's
    distinct reason, in order)."""
    by_kind: dict[Kind, list[KindCoverage]] = {}
    for entries in parts:
        for entry in entries:
            by_kind.setdefault(entry.kind, []).append(entry)
    merged: list[KindCoverage] = []
    for kind, entries in by_kind.items():
        statuses = {e.status for e in entries}
        if Coverage.FOUND in statuses:
            merged.append(KindCoverage(kind, Coverage.FOUND))
        elif Coverage.NOTHING_FOUND in statuses:
            merged.append(KindCoverage(kind, Coverage.NOTHING_FOUND))
        else:
            whys = dict.fromkeys(e.why for e in entries if e.why)
            merged.append(KindCoverage(kind, Coverage.NOT_MEASURED, "; ".join(whys) or None))
    return merged


def bench_command(
    fix: str, script: str | None, options: str = "", factory: str | None = None
) -> str:
    """The ``xlaprof bench FIX SCRIPT:FACTORY`` line a finding offers (one spelling everywhere).

    A command only where both are known: the profiled script and a function in it that returns
    ``(model, batch)`` (``analyzers/shared/sourcecode.bench_factory``). Otherwise the text says
    how to make one, and names no file the user never gave (a pasted report has no script).
    """
    if script and factory:
        return f"xlaprof bench {fix} {script}:{factory}{options}"
    where = f"in {script} (or a file beside it)" if script else "in a file of yours"
    target = f"{script}:FUNCTION" if script else "FILE.py:FUNCTION"
    return (
        f"write a function {where} that builds the model and returns (model, example_batch), "
        f"then run: xlaprof bench {fix} {target}{options}"
    )
