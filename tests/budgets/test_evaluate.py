"""The verdicts of ``xlaprof check`` (``xlaprof.budgets.evaluate``) on fixed step rows: a step
time ratio against a baseline and compile seconds are durations, so they are judged here on
steps whose times are written in the test, never on a run this machine timed."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlaprof.budgets import Budgets, Status, evaluate
from xlaprof.errors import BudgetError
from xlaprof.model.input import AnalysisInput
from xlaprof.model.parts import Part, SourceInfo
from xlaprof.model.result import PartResult
from xlaprof.pipeline import analyze_parts
from xlaprof.rundir.schema import StepRow


def _steps(walls: list[float], compiles: dict[int, int] | None = None) -> list[StepRow]:
    compiles = compiles or {0: 1, 1: 1}
    return [
        StepRow(step=i, wall_s=w, compiles=compiles.get(i, 0), compile_s=compiles.get(i, 0) * 2.0)
        for i, w in enumerate(walls)
    ]


def _result(steps: list[StepRow], name: str = "run") -> PartResult:
    data = AnalysisInput(steps=steps)
    (result,) = analyze_parts([Part(name=name, data=data, sources=[SourceInfo(name, ["run"])])])
    return result


def test_step_time_ratio_verdict_on_fixed_steps() -> None:
    # GIVEN steady steps (2..6) with medians of 0.100 s (baseline) and 0.130 s (run)
    baseline = _result(_steps([9.0, 9.0, 0.09, 0.10, 0.10, 0.11, 0.50]))
    run = _result(_steps([9.0, 9.0, 0.12, 0.13, 0.13, 0.14, 0.13]))
    budgets = Budgets(max_step_time_ratio=1.25, baseline=Path("base"))
    # WHEN compared: 1.3 > 1.25 fails, 1.3 <= 1.35 passes
    failed = evaluate(budgets, [run], [baseline]).outcomes[0]
    assert failed.status is Status.FAIL and failed.value == pytest.approx(1.3)
    assert failed.evidence["baseline_median_s"] == pytest.approx(0.10)
    passed = evaluate(Budgets(max_step_time_ratio=1.35, baseline=Path("b")), [run], [baseline])
    assert passed.ok


def test_compile_seconds_verdict_on_fixed_steps() -> None:
    run = _result(_steps([1.0, 1.0, 0.1, 0.1], compiles={0: 1, 1: 1, 3: 1}))  # 3 x 2.0 s
    over = evaluate(Budgets(max_compile_seconds=5.5), [run]).outcomes[0]
    assert over.status is Status.FAIL and over.value == 6.0
    assert evaluate(Budgets(max_compile_seconds=6.0), [run]).ok
    assert evaluate(Budgets(max_recompilations=1), [run]).ok  # one compile at step 3
    assert not evaluate(Budgets(max_recompilations=0), [run]).ok
    with pytest.raises(BudgetError):
        evaluate(Budgets(), [run])  # no budget: a check of nothing must not pass
