"""The ``Finding``: what every analyzer returns and every renderer shows.

A finding is a diagnosis a person can act on: a kind, a severity, a one-line title, the evidence
(numbers, so the reader can judge), where in the user's code it comes from when that is known,
and what to do about it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    """A place in the user's own source code."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    @classmethod
    def parse(cls, text: str) -> Location | None:
        """``"file:line"`` as a location; None when it has no file or no line number."""
        file, _, line = text.rpartition(":")
        return cls(file, int(line)) if file and line.isdigit() else None


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

    def to_json(self) -> dict[str, Any]:
        """The JSON contract's finding object (docs/json-format.md)."""
        return {
            "kind": self.kind.value,
            "severity": self.severity.value,
            "title": self.title,
            "location": (
                None
                if self.location is None
                else {"file": self.location.file, "line": self.location.line}
            ),
            "evidence": self.evidence,
            "suggestion": self.suggestion,
            "cost": None if self.cost is None else self.cost.to_json(),
        }


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
