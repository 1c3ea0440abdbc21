"""Which steps are warm-up: the one rule every table, the story and the analyzers share.

Warm-up is the first ``warmup_steps`` steps by position, in step order, among the steps an
input holds, whatever their numbers: a run directory's steps are numbered from 0, so its
warm-up is steps 0 to ``warmup_steps - 1``. A capture whose steps are numbered from elsewhere
(a job's steps 100 to 109, a live capture from step 48) may have begun anywhere in its job:
where it measured each step's compile time, its warm-up is its leading steps that compiled, at
most ``warmup_steps`` of them, and it ends at the first step that compiled nothing (JAX's step
100 compiled the training step and step 101 reused it: step 100 alone is warm-up; a window that
began in steady state, its first step compiling nothing, has none). Where compile time is not
measured (a capture without the runtime's compile events), the first steps by position are
warm-up. A first captured step that compiled cannot be told from a job's start: it is warm-up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.rundir.schema import StepRow


def first_steady_step(
    steps: Iterable[int], warmup_steps: int, compile_s: Iterable[float | None] | None = None
) -> int:
    """The first step number after warm-up among ``steps`` (the step numbers an input holds,
    in any order): a step numbered below it is warm-up, one at or above it is after warm-up.
    ``compile_s``: each step's compile seconds, in the order of ``steps`` (None or NaN: not
    measured). See the module docstring for the rule. With no more steps than
    ``warmup_steps``, every step is warm-up (one past the last); with no steps, steps are taken
    as numbered from 0 (``warmup_steps`` itself)."""
    numbers = [int(step) for step in steps]
    held = sorted(set(numbers))
    if not held:
        return warmup_steps
    if warmup_steps <= 0:
        return held[0]
    compiled = {} if held[0] == 0 else _compiled(numbers, compile_s)
    for step in held[:warmup_steps]:
        if compiled.get(step) is False:  # measured, and it compiled nothing: steady from here
            return step
    if len(held) <= warmup_steps:
        return held[-1] + 1
    return held[warmup_steps]


def first_steady_of_rows(rows: Sequence[StepRow], warmup_steps: int) -> int:
    """``first_steady_step`` of a run's step rows, each with its count of compiles (0: the
    step compiled nothing)."""
    return first_steady_step(
        [row.step for row in rows], warmup_steps, [float(row.compiles) for row in rows]
    )


def first_steady_of(frame: pd.DataFrame, warmup_steps: int, compile_column: str) -> int:
    """``first_steady_step`` of a table with a ``step`` column and each step's compile time in
    ``compile_column`` (a step timeline's ``compile_s``, a host table's ``compile_ms``)."""
    compiles = frame.get(compile_column)
    return first_steady_step(
        frame["step"], warmup_steps, None if compiles is None else compiles.tolist()
    )


def _compiled(numbers: list[int], compile_s: Iterable[float | None] | None) -> dict[int, bool]:
    """Per step whose compile time was measured, whether it compiled (a step listed twice:
    whether either did)."""
    if compile_s is None:
        return {}
    found: dict[int, bool] = {}
    for step, seconds in zip(numbers, compile_s, strict=True):
        if seconds is None or math.isnan(seconds):
            continue
        found[step] = found.get(step, False) or seconds > 0
    return found
