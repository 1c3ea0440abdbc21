"""A run's trace window tells the run's story: its host-vs-device table ("Host work vs device
busy", ``tracing_vs_device``) has each traced step's host wall as the step's row measured it, and
the same bound as the step timeline and the story (the one step model, ``tables/story.py``).

Expected values come from the run's own files: ``steps.jsonl``'s ``wall_s``, ``run.json``'s
trace window, and the capture's ``xlaprof_step`` spans decoded without xlaprof."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from decode import decode_xspace
from helpers import SAMPLE_RUNS, sample_run, step_model_run

import xlaprof

# sample_traces/step_model: runs with seven traced steps
STEP_MODEL_RUNS = ("device_bound_logging", "tracing_bound_tiny_ops")
RUNS = [(sample_run, name) for name in SAMPLE_RUNS] + [(step_model_run, n) for n in STEP_MODEL_RUNS]


def _run_dir(folder: Path) -> Path:
    return next(folder.glob("*/run.json")).parent


def _walls(run: Path) -> dict[int, float]:
    """Each step's ``wall_s`` as ``steps.jsonl`` records it."""
    rows = [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines() if line]
    return {int(row["step"]): float(row["wall_s"]) for row in rows}


def _spans(run: Path) -> dict[int, float]:
    """Each traced step's ``xlaprof_step`` span in the capture (seconds): the session's spans
    in time order are the trace window's steps, from its first (``run.json``)."""
    first = json.loads((run / "run.json").read_text())["trace_steps"][0]
    capture = next(run.glob("plugins/profile/*/*.xplane.pb"))
    spans = sorted(decode_xspace(capture).named("xlaprof_step"), key=lambda e: e.start_ns)
    return {first + k: (e.end_ns - e.start_ns) / 1e9 for k, e in enumerate(spans)}


@pytest.mark.parametrize(("folder", "name"), RUNS, ids=[f"{f.__name__}:{n}" for f, n in RUNS])
def test_the_trace_tables_host_wall_and_bound_are_the_step_models(
    folder: Callable[[str], Path], name: str
) -> None:
    # GIVEN a bundled run with a trace window, its step rows and its capture's step spans
    run = _run_dir(folder(name))
    walls, spans = _walls(run), _spans(run)
    # the span also holds the session's bookkeeping at the boundary, after the row's clock
    assert all(spans[step] > walls[step] for step in spans), (spans, walls)
    # WHEN the run is analyzed
    analysis = xlaprof.Analysis(run, warn=False)
    table = analysis.tracing_vs_device()
    timeline = analysis.timeline().set_index("step")
    story = analysis.result.story
    assert story is not None
    # THEN every traced step's host wall is its row's wall_s (not the span), to the
    # nanosecond (a run that ended before its window began traced none)
    assert sorted(int(step) for step in table["step"]) == sorted(spans)
    for row in table.itertuples(index=False):
        assert row.host_wall_s == pytest.approx(walls[int(row.step)], abs=1e-9), (name, row.step)
        # AND its bound is the step timeline's, with tracing_bound saying the same
        bound = timeline.loc[int(row.step), "bound"]
        assert row.bound == bound, (name, row.step, row.bound, bound)
        assert row.tracing_bound == (bound == "tracing"), (name, row.step)
    # AND the story's median step, where traced, has that bound too
    if story.median_step in spans:
        (bound,) = table.loc[table["step"] == story.median_step, "bound"]
        assert bound == story.bound == timeline.loc[story.median_step, "bound"]
