"""What a kind's cost rule reads (``StepCosts``): the run's per-step rows and the step model's
compile time per step, so each kind prices its own findings in its own module (its registry
entry's ``price``), and the pipeline asks every kind alike (``xlaprof.analyzers.price``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xlaprof.model.warmup import first_steady_of, first_steady_of_rows

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.rundir.schema import StepRow


@dataclass(frozen=True)
class StepCosts:
    """The figures a cost is measured from: each recorded step's row, by step; the step
    model's compile seconds per step (the run's CompileTime; in a traced step, its compile
    spans: the story's "compiled again" line); the first step number after warm-up (the first
    ``warmup_steps`` steps by position, ``model.warmup``); the steps after warm-up."""

    rows: dict[int, StepRow]
    compile_s: dict[int, float]
    first_steady: int

    @property
    def after_warmup(self) -> list[int]:
        return [step for step in self.rows if step >= self.first_steady]

    @classmethod
    def of(cls, rows: list[StepRow], timeline: pd.DataFrame | None, warmup: int) -> StepCosts:
        compile_s: dict[int, float] = {}
        if timeline is not None and not timeline.empty:
            compile_s = {
                int(s): float(c)
                for s, c in zip(timeline["step"], timeline["compile_s"], strict=True)
                if c == c  # NaN: not measured
            }
        # the steps the input holds: the timeline's (a run's steps, or a capture's), else the rows
        if timeline is None:
            first = first_steady_of_rows(rows, warmup)
        else:
            first = first_steady_of(timeline, warmup, "compile_s")
        return cls({row.step: row for row in rows}, compile_s, first)
