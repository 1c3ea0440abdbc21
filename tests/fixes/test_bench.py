"""A benchmark's sides are measured by the pipeline: the figures analyze and diff show."""

from __future__ import annotations

import pytest
from helpers import SAMPLE_RUNS, sample_run

from xlaprof.fixes.bench import measured_side
from xlaprof.model.request import AnalysisRequest
from xlaprof.pipeline import analyze


@pytest.mark.parametrize("name", SAMPLE_RUNS)
def test_a_bench_sides_median_step_is_analyzes_and_diffs(name: str) -> None:
    # GIVEN a sample run directory (one process)
    (run,) = [p.parent for p in sample_run(name).glob("*/run.json")]
    # WHEN bench measures it as one side of a fix
    side = measured_side("before", run)
    # THEN its figures are analyze's for the same run, the median steady step first
    (part,) = analyze(AnalysisRequest((run,))).parts
    assert side.summary["step_median_s"] == part.figures["step_median_s"]
    assert part.story is None or side.summary["step_median_s"] == part.story.median_wall_s
    assert side.summary == part.figures  # which diff compares (tables.compare)
