"""One step model per run (``xlaprof.tables.story``): the timeline, the host-vs-device table,
the bottleneck table and the story a report opens with all say the same thing about each
step, on the real run directories (sample_traces/runs)."""

from __future__ import annotations

import pytest
from helpers import SAMPLE_RUNS, sample_run

import xlaprof
from xlaprof.pipeline import analyze_one
from xlaprof.tables.device.bottleneck import CLASS_BOUNDS


def _bottleneck_bounds(trace: xlaprof.Trace) -> dict[int, str]:
    """Per step, the bound of its busiest device, read straight from the bottleneck table."""
    table = trace.summary().bottleneck
    table = table[table["step"].notna()].sort_values("busy_s", ascending=False)
    first = table.drop_duplicates("step")
    return {int(r.step): CLASS_BOUNDS[r.bottleneck] for r in first.itertuples()}


def test_every_table_gives_a_traced_step_the_same_bound() -> None:
    # GIVEN the real run directories with a trace window (sample_traces/runs, by xlaprof run)
    compared = 0
    for name in SAMPLE_RUNS:
        result, _, _ = analyze_one(sample_run(name))
        assert result.trace is not None and result.timeline is not None, name
        expected = _bottleneck_bounds(result.trace)
        # WHEN the step timeline and the host-vs-device table give each traced step a bound
        traced = result.timeline[result.timeline["source"] == "trace"]
        timeline = {int(r.step): r.bound for r in traced.itertuples()}
        tracing = {int(r.step): r.bound for r in result.trace.tracing_vs_device().itertuples()}
        # THEN both are the bottleneck table's, step for step
        assert timeline == {step: expected[step] for step in timeline}, name
        assert tracing == {step: expected[step] for step in tracing}, name
        compared += len(tracing)
    assert compared >= 10  # most sample runs trace two or more numbered steps


def test_a_step_spent_compiling_is_compile_bound_never_tracing_bound() -> None:
    # GIVEN the run of a loop whose batch size changes: its traced step 4 compiles a new graph
    result, _, _ = analyze_one(sample_run("recompile_varying_batch"))
    row = result.timeline.set_index("step").loc[4]
    assert row["compile_s"] > 0.5 * row["wall_s"]  # most of the step was XLA compiling
    # WHEN its bound is read from every table that shows it
    tracing = result.trace.tracing_vs_device().set_index("step").loc[4]
    # THEN it is compile-bound everywhere, and the story does not call it steady
    assert row["bound"] == tracing["bound"] == "compile"
    assert not row["steady"]
    assert not tracing["tracing_bound"]
    assert 4 in result.story.later_compile_steps


def test_the_story_is_the_median_steady_step_whose_parts_add_up() -> None:
    # GIVEN a tracing-bound loop of tiny ops (9 steady steps after 2 of warm-up)
    result, _, _ = analyze_one(sample_run("tracing_bound_tiny_ops"))
    story = result.story
    steady = result.timeline[result.timeline["steady"]]
    # WHEN the story tells where a steady step goes
    median = steady.sort_values("wall_s").iloc[(len(steady) - 1) // 2]
    # THEN it is one real steady step, of median wall time, whose parts add up to its wall time
    assert (story.median_step, story.steady_steps, story.warmup_steps) == (
        int(median["step"]),
        len(steady),
        2,
    )
    assert sum(v for v in story.parts.values() if v) == pytest.approx(story.median_wall_s)
    # AND its largest part and the change worth most are the tracing and its finding
    assert story.bound == "tracing"
    assert story.worth_most is not None and story.worth_most.kind.value == "tracing_bound"
