"""One step model per run (``xlaprof.tables.story``): the timeline, the host-vs-device table,
the bottleneck table and the story a report opens with all say the same thing about each
step, on the real run directories (sample_traces/runs)."""

from __future__ import annotations

import functools
import re
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest
from decode import clipped_union_ns, decode_xspace
from helpers import SAMPLE_RUNS, jax_cpu_sample, sample_capture, sample_run, step_model_run

import xlaprof
from xlaprof.analyzers import story_answers
from xlaprof.inputs.traces import load_trace
from xlaprof.model.result import PartResult
from xlaprof.parse.units import format_seconds
from xlaprof.pipeline import analyze_one
from xlaprof.report.console import story_lines
from xlaprof.tables.story import with_bounds, worth_most
from xlaprof.tables.timeline import step_timeline

STEP_MODEL_RUNS = ("device_bound_logging", "tracing_bound_tiny_ops")


@functools.cache
def _analyzed(path: Path) -> PartResult:
    """A run analyzed once for this module's tests (results are read, never changed)."""
    result, _, _ = analyze_one(path)
    return result


def _all_runs() -> list[Path]:
    return [sample_run(name) for name in SAMPLE_RUNS] + [step_model_run(n) for n in STEP_MODEL_RUNS]


def test_a_step_gets_the_same_bound_whether_or_not_it_was_traced() -> None:
    # GIVEN the real run directories with a trace window (sample_traces/runs and step_model)
    compared = 0
    for path in _all_runs():
        result = _analyzed(path)
        assert result.timeline is not None, path
        # WHEN each traced steady step is bound from the run and its trace, and again from the
        # run's per-step metrics alone (as if no trace window had held it)
        untraced = with_bounds(step_timeline(result.part.data.steps), result.part.data.warmup_steps)
        alone = untraced.set_index("step")["bound"]
        traced = result.timeline[(result.timeline["source"] == "trace") & result.timeline["steady"]]
        # THEN the verdict is the same, step for step
        for step, bound in zip(traced["step"], traced["bound"], strict=True):
            assert bound == alone.loc[step], (path, step)
            compared += 1
    assert compared >= 20


def _independent_parts(path: Path, step: int) -> dict[str, float]:
    """The measured parts of one step, from the run's own rows (``load_run(...).steps()``) and,
    where a trace window held it, the trace's events on the stepping thread."""
    run = xlaprof.load_run(path)
    row = run.steps().set_index("step").loc[step]
    wall = float(row["wall_s"])
    compile_s = float(row["compile_s"])
    transfer = float(row["to_device_s"] + row["from_device_s"])
    host = float(row["host_cpu_s"])
    wait = 0.0
    trace = load_trace(path)
    bounds = trace.step_bounds.set_index("step")
    if step in bounds.index:  # traced: the spans of the thread's own line, in the step's bounds
        a, b = int(bounds.loc[step, "start_ns"]), int(bounds.loc[step, "end_ns"])
        events = trace.events[trace.events["line"] == "python"]
        names = events["name"].astype(str)

        def union(*parts: str) -> float:
            chosen = events[names.map(lambda n: any(p in n for p in parts))]
            spans = list(zip(chosen["start_ns"], chosen["end_ns"], strict=True))
            return clipped_union_ns(spans, a, b) / 1e9

        wall = (b - a) / 1e9
        compile_s = union("XLAGraphExecutor::Compile")
        transfer = union("Compile", "TransferToDevice", "TransferFromDevice") - compile_s
        wait = union("Compile", "Transfer", "WaitDeviceOps") - compile_s - transfer
        build = union("Compile", "Transfer", "WaitDeviceOps", "SyncTensorsGraphInternal")
        build -= compile_s + transfer + wait
        sync_cpu = row["sync_cpu_s"]
        # the thread's CPU outside the sync (all of it where the sync's was not split off,
        # less the graph build the trace measured), plus that build
        outside = (
            host - float(sync_cpu)
            if sync_cpu == sync_cpu and sync_cpu is not None
            else host - build
        )
        host = max(outside, 0.0) + build
    device = max(wait, min(float(row["execute_s"]), wall))
    parts = {}
    left = wall
    for name, seconds in (
        ("compile", compile_s),
        ("transfer", transfer),
        ("tracing", host),
        ("device", device),
    ):
        parts[name] = min(seconds, left)
        left -= parts[name]
    parts["unattributed"] = left
    return parts


@pytest.mark.parametrize(
    ("path", "traced"),
    [
        (sample_run("recompile_varying_batch"), False),  # as make demo: median step untraced
        (step_model_run("device_bound_logging"), True),
        (step_model_run("tracing_bound_tiny_ops"), True),
    ],
    ids=["median_outside_window", "device_bound_traced", "tracing_bound_traced"],
)
def test_the_headline_is_the_runs_measured_parts(path: Path, traced: bool) -> None:
    # GIVEN a run (its median steady step inside the trace window or outside it)
    result = _analyzed(path)
    story = result.story
    assert (story.median_source == "trace") is traced
    # WHEN the story splits the median steady step
    expected = _independent_parts(path, story.median_step)
    # THEN each part is what the run (and its trace) measured for that step, and the parts
    # and the unattributed rest add up to its wall time
    for name, seconds in expected.items():
        assert story.parts[name] == pytest.approx(seconds, abs=2e-6), name
    assert sum(story.parts.values()) == pytest.approx(story.median_wall_s)
    # AND its largest part is the largest measured one, never the unattributed rest
    measured = {k: v for k, v in expected.items() if k != "unattributed"}
    assert story.bound == max(measured, key=measured.get)
    lines = story_lines(story)
    (largest,) = [line for line in lines if "Largest" in line]
    assert "unattributed" not in largest
    assert all("unattributed" not in line for line in lines if "Worth most" in line)


def test_the_story_says_the_trace_window_holds_a_compile() -> None:
    # GIVEN the run that `make demo` makes: its window (steps 4-5) holds step 4's recompile
    result = _analyzed(sample_run("recompile_varying_batch"))
    compiled = result.part.data.steps[4].compiles
    assert compiled == 1
    # THEN the story says so, and calls no compiling step steady
    assert result.story.traced_steps == [4, 5]
    assert result.story.traced_compile_steps == [4]
    assert any("holds a compile in step(s) 4" in line for line in story_lines(result.story))


def test_a_step_spent_compiling_is_compile_bound_never_tracing_bound() -> None:
    # GIVEN the run of a loop whose batch size changes: its traced step 4 compiles a new graph
    result = _analyzed(sample_run("recompile_varying_batch"))
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
    result = _analyzed(sample_run("tracing_bound_tiny_ops"))
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


def test_worth_most_is_the_largest_cost_per_step_and_says_so() -> None:
    # GIVEN the findings of two real runs, with the costs their runs measured: a recompile paid
    # once (the varying batch: compile time after warm-up) and a read in every step (.item())
    recompiled = _analyzed(sample_run("recompile_varying_batch"))
    reading = _analyzed(sample_run("host_sync_item"))
    (recompile,) = [f for f in recompiled.findings if f.kind.value == "recompilation"]
    (read,) = [f for f in reading.findings if f.kind.value == "host_sync"]
    steps = recompiled.part.data.steps
    later = [s.compile_s for s in steps if s.step >= 2 and s.compiles]
    # the figure the story's "compiled again" line gives (traced step 4: its compile span),
    # within 1% of the runtime's CompileTime for the same compiles
    assert recompile.cost.one_time_s == recompiled.story.later_compile_s
    assert recompile.cost.one_time_s == pytest.approx(sum(later), rel=0.01)
    assert recompile.cost.per_step_s is None
    rows = reading.part.data.steps
    steady = [r for r in rows if r.step >= 2 and not r.compiles and r.transfers_from_device]
    assert read.cost.per_step_s == statistics.median(r.from_device_s for r in steady)
    assert recompile.cost.one_time_s > read.cost.per_step_s  # the one-time cost is larger
    # WHEN the change worth most is chosen among both
    story = recompiled.story
    chosen = worth_most(story, [recompile, read], story_answers())
    # THEN it is the cost paid in every step, and the story says it was ranked by that
    assert chosen is read
    assert story.worth_most_basis.startswith("the largest cost per step")
    # AND the finding's cost is in its JSON
    assert read.to_json()["cost"]["per_step_s"] == read.cost.per_step_s


@pytest.mark.parametrize(
    "capture",
    [jax_cpu_sample, lambda: sample_capture("healthy_loop")],
    ids=["jax_cpu", "torch_xla_cpu"],
)
def test_a_capture_with_no_device_plane_never_calls_host_work_a_wait(
    capture: Callable[[], Path],
) -> None:
    # GIVEN a real capture of XLA's CPU client alone (JAX; torch_xla's CPU PJRT): a plain
    # protobuf read finds no device plane, so the XLA ops ran on the host's own threads; the
    # host's waits are its WaitDeviceOps spans (torch_xla's runtime records them, JAX none)
    path = capture()
    decoded = decode_xspace(path)
    assert decoded.events and not decoded.on("/device:")
    lazy_runtime = any("SyncTensorsGraph" in e.name for e in decoded.events)
    waits = [(int(e.start_ns), int(e.end_ns)) for e in decoded.named("WaitDeviceOps")]
    # WHEN it is analyzed
    result = _analyzed(path)
    story, timeline = result.story, result.timeline.set_index("step")
    step = result.trace.step_bounds.set_index("step").loc[story.median_step]
    a, b = int(step["start_ns"]), int(step["end_ns"])
    # THEN the median step's device part is the host's own wait where the runtime records
    # one (here none: 0), and not measured (None) where nothing does: never the CPU's busy
    # time, which the timeline shows as device busy
    expected = clipped_union_ns(waits, a, b) / 1e9 if lazy_runtime else None
    assert story.parts["device"] == (None if expected is None else pytest.approx(expected))
    busy = timeline.loc[story.median_step, "device_busy_s"]
    assert busy > 0 and story.host_xla_busy_s == busy
    # AND every step's device part is at most its measured wait (--json, the step chart)
    wait, part = timeline["device_wait_s"], timeline["part_device_s"]
    assert (part.isna() == wait.isna()).all() and (part.fillna(0) <= wait.fillna(0)).all()
    # AND the measured parts and the unattributed rest still add up to the wall time
    assert sum(v for v in story.parts.values() if v) == pytest.approx(story.median_wall_s)
    # AND the headline (console and HTML) quotes no wait on a device, and says the busy time
    # as what it is
    lines = story_lines(story)
    assert not any(re.search(r"waiting on the device \d", line) for line in lines), lines
    assert any(f"host CPU ran XLA ops for {format_seconds(busy)}" in line for line in lines)
