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
from decode import Decoded, clipped_union_ns, decode_xspace, run_steps, train_windows
from helpers import (
    GPU_JAX,
    SAMPLE_RUNS,
    analyzed_inputs,
    jax_cpu_sample,
    sample_capture,
    sample_run,
    step_model_run,
)

import xlaprof
from xlaprof.analyzers import story_answers
from xlaprof.inputs.traces import load_trace
from xlaprof.model.result import PartResult, StepStory
from xlaprof.parse.units import format_seconds
from xlaprof.pipeline import AnalyzedPart
from xlaprof.report.console import story_lines
from xlaprof.tables.story import with_bounds, worth_most
from xlaprof.tables.timeline import step_timeline

STEP_MODEL_RUNS = ("device_bound_logging", "tracing_bound_tiny_ops")


@functools.cache
def _inputs(path: Path) -> AnalyzedPart:
    """A run analyzed once for this module's tests, beside its inputs (read, never changed)."""
    analyzed: AnalyzedPart = analyzed_inputs(path)
    return analyzed


def _analyzed(path: Path) -> PartResult:
    return _inputs(path).result


def _all_runs() -> list[Path]:
    return [sample_run(name) for name in SAMPLE_RUNS] + [step_model_run(n) for n in STEP_MODEL_RUNS]


def test_a_step_gets_the_same_bound_whether_or_not_it_was_traced() -> None:
    # GIVEN the real run directories with a trace window (sample_traces/runs and step_model)
    compared = 0
    for path in _all_runs():
        result = _analyzed(path)
        assert result.timeline is not None, path
        data = _inputs(path).data
        # WHEN each traced steady step is bound from the run and its trace, and again from the
        # run's per-step rows and executions alone (as if no trace window had held it)
        untraced = with_bounds(step_timeline(data.steps, device=data.device), data.warmup_steps)
        alone = untraced.set_index("step")["bound"]
        traced = result.timeline[(result.timeline["source"] == "trace") & result.timeline["steady"]]
        # THEN the verdict is the same, step for step
        for step, bound in zip(traced["step"], traced["bound"], strict=True):
            assert bound == alone.loc[step], (path, step)
            compared += 1
    assert compared >= 20


@functools.cache
def _cpu_client(path: Path) -> tuple[int, tuple[tuple[int, int], ...], frozenset[int]]:
    """The run's capture decoded without xlaprof: its clock's epoch offset (from its header),
    the CPU client's busy spans (its XLA ops, events with an ``hlo_op`` stat, and its
    executions, the thunk executor's spans) and the steps it traced."""
    capture = next(path.glob("*/plugins/profile/*/*.xplane.pb"))
    trace = load_trace(capture)
    (epoch,) = trace.epoch_offset_ns.values()
    spans = tuple(
        (int(e.start_ns), int(e.end_ns))
        for e in decode_xspace(capture).events
        if "hlo_op" in e.stats or e.name.startswith("ThunkExecutor::Execute")
    )
    return epoch, spans, frozenset(int(s) for s in trace.step_bounds["step"])


def _device_in_trace(path: Path, begin: float, end: float) -> float:
    """The CPU client's busy time (s) between two Unix times, in the run's capture."""
    epoch, spans, _ = _cpu_client(path)
    return clipped_union_ns(list(spans), round(begin * 1e9) - epoch, round(end * 1e9) - epoch) / 1e9


def _independent_parts(path: Path, step: int) -> dict[str, float | None]:
    """The measured parts of one step, from the run's own files: its rows
    (``load_run(...).steps()``), its executions and step times as ``decode.run_steps`` reads
    them from the JSON, and, where a trace window held the step, the capture decoded without
    xlaprof. The parts take the step's time compile first, then the larger of device work and
    the host's side (its CPU and its wait for a CPU), then the rest (docs/analyzers/timeline.md).
    The wait for a CPU is None where the run did not record it (runs before it was)."""
    run = xlaprof.load_run(path)
    row = run.steps().set_index("step").loc[step]
    ran = run_steps(path)[step]
    wall = ran["time_s"]
    compile_s = float(row["compile_s"])
    transfer = float(row["to_device_s"] + row["from_device_s"])
    host = float(row["host_cpu_s"])
    device = ran["device_s"]
    if step in _cpu_client(path)[2]:  # traced: the trace's device time
        device = _device_in_trace(path, ran["begin"], ran["end"])
    recorded = row.get("cpu_wait_s")
    waited = None if recorded is None or recorded != recorded else float(recorded)
    order = (
        ["device", "tracing", "cpu_wait", "transfer"]
        if device >= host + (waited or 0.0)
        else ["tracing", "cpu_wait", "transfer", "device"]
    )
    amounts = {
        "compile": compile_s,
        "transfer": transfer,
        "tracing": host,
        "device": device,
        "cpu_wait": waited,
    }
    parts: dict[str, float | None] = {}
    left = wall
    for name in ["compile", *order]:
        amount = amounts[name]
        if amount is None:
            parts[name] = None
            continue
        parts[name] = min(amount, left)
        left -= min(amount, left)
    parts["unattributed"] = left
    return parts


@pytest.mark.parametrize(
    "path",
    [
        sample_run("recompile_varying_batch"),  # as make demo
        step_model_run("device_bound_logging"),
        step_model_run("tracing_bound_tiny_ops"),
    ],
    ids=["demo", "device_bound", "tracing_bound"],
)
def test_the_headline_is_the_runs_measured_parts(path: Path) -> None:
    # GIVEN a run with a trace window
    result = _analyzed(path)
    story = result.story
    # WHEN the story splits the median steady step, and the timeline every steady step
    expected = _independent_parts(path, story.median_step)
    # THEN the step's time is what its files say it cost the run, each part is what the run
    # (and its trace) measured for that step, and the parts and the unattributed rest add up
    assert story.median_wall_s == pytest.approx(run_steps(path)[story.median_step]["time_s"])
    for name, seconds in expected.items():
        if seconds is None:  # not recorded: not measured
            assert story.parts[name] is None, name
        else:
            assert story.parts[name] == pytest.approx(seconds, abs=20e-6), name
    assert sum(v for v in story.parts.values() if v is not None) == pytest.approx(
        story.median_wall_s
    )
    timeline = result.timeline
    traced = 0
    for _, row in timeline[timeline["steady"]].iterrows():
        step = int(row["step"])
        parts = _independent_parts(path, step)
        for name, seconds in parts.items():
            value = row[f"part_{name}_s"]
            if seconds is None:
                assert value != value, (step, name)  # NaN: not measured
            else:
                assert value == pytest.approx(seconds, abs=20e-6), (step, name)
        traced += row["source"] == "trace"
    assert traced >= 1  # the trace window's steps, by the same rule
    # AND its largest part is the largest measured one, never the unattributed rest, and the
    # headline's largest part is what the steady steps' bounds count most
    measured = {k: v for k, v in expected.items() if k != "unattributed" and v is not None}
    assert story.bound == max(measured, key=lambda k: measured[k])
    assert story.bound == max(story.bound_steps, key=story.bound_steps.get)
    lines = story_lines(story)
    (largest,) = [line for line in lines if "Largest" in line]
    assert "unattributed" not in largest
    assert all("unattributed" not in line for line in lines if "Worth most" in line)


def test_the_story_says_the_trace_window_holds_a_compile() -> None:
    # GIVEN the run that `make demo` makes: its window (steps 4-5) holds step 4's recompile
    result = _analyzed(sample_run("recompile_varying_batch"))
    compiled = _inputs(sample_run("recompile_varying_batch")).data.steps[4].compiles
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
    tracing = result.tracing_vs_device().set_index("step").loc[4]
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
    steps = _inputs(sample_run("recompile_varying_batch")).data.steps
    later = [s.compile_s for s in steps if s.step >= 2 and s.compiles]
    # the figure the story's "compiled again" line gives (traced step 4: its compile span),
    # within 1% of the runtime's CompileTime for the same compiles
    assert recompile.cost.one_time_s == recompiled.story.later_compile_s
    assert recompile.cost.one_time_s == pytest.approx(sum(later), rel=0.01)
    assert recompile.cost.per_step_s is None
    rows = _inputs(sample_run("host_sync_item")).data.steps
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
def test_a_capture_with_no_device_plane_counts_the_cpu_clients_work_never_a_wait(
    capture: Callable[[], Path],
) -> None:
    # GIVEN a real capture of XLA's CPU client alone (JAX; torch_xla's CPU PJRT): a plain
    # protobuf read finds no device plane, so the XLA programs ran on the client's own threads
    path = capture()
    decoded = decode_xspace(path)
    assert decoded.events and not decoded.on("/device:")
    # WHEN it is analyzed
    result = _analyzed(path)
    story, timeline = result.story, result.timeline.set_index("step")
    step = _inputs(path).trace.step_bounds.set_index("step").loc[story.median_step]
    a, b = int(step["start_ns"]), int(step["end_ns"])
    # THEN the median step's device work is the CPU client's busy time in it: its XLA ops
    # (events with an hlo_op stat) and its executions (the thunk executor's spans), decoded
    # without xlaprof
    spans = [
        (int(e.start_ns), int(e.end_ns))
        for e in decoded.events
        if "hlo_op" in e.stats or e.name.startswith("ThunkExecutor::Execute")
    ]
    busy = clipped_union_ns(spans, a, b) / 1e9
    assert timeline.loc[story.median_step, "device_busy_s"] == pytest.approx(busy, abs=2e-6)
    assert story.parts["device"] == pytest.approx(min(busy, story.median_wall_s), abs=2e-6)
    # AND the measured parts and the unattributed rest still add up to the step's time
    assert sum(v for v in story.parts.values() if v) == pytest.approx(story.median_wall_s)
    # AND the headline never calls it a wait on a device, nor the host's work one
    lines = story_lines(story)
    assert not any(re.search(r"waiting on the device", line) for line in lines), lines
    assert any("device work" in line for line in lines), lines


def test_the_headline_says_where_more_steps_have_another_largest_part() -> None:
    # GIVEN a story whose median step is device-bound while more of its steady steps have
    # their wait for a CPU as the largest part (a demo run on a busy machine: 3 and 4 of 7)
    story = StepStory(
        steps=9, warmup_steps=2, steady_steps=7, median_step=8, median_wall_s=0.0347,
        parts={"device": 0.0233, "tracing": 0.0088, "cpu_wait": 0.0025},
        bound="device", bound_steps={"cpu_wait": 4, "device": 3},
    )  # fmt: skip
    lines = story_lines(story)
    # THEN the headline names the median step's largest part with its count, and the line
    # after it the part more steps have, with theirs: no count is left out or contradicted
    (at,) = [i for i, line in enumerate(lines) if "Largest measured part" in line]
    assert "device work" in lines[at] and "(in 3 of 7 steady steps)" in lines[at]
    assert "In more steady steps (4 of 7)" in lines[at + 1]
    assert "waiting for a CPU" in lines[at + 1]
    # AND where the median step's part is also the most common, there is no such line
    story.bound_steps = {"device": 4, "cpu_wait": 3}
    assert not any("In more steady steps" in line for line in story_lines(story))


def test_the_host_line_says_no_time_twice() -> None:
    # GIVEN every real run directory: the bundled samples' older sessions recorded each step's
    # wait for a CPU, not the part of it inside the sync; the step-model runs recorded both
    for path in _all_runs():
        story = _analyzed(path).story
        assert story is not None and story.host_wall_s is not None, path
        # WHEN the story says what the host did in its median steady step THEN the stepping
        # thread's CPU, the time its sync was blocked and its wait for a CPU are apart: they
        # fit in the host's wall for the step (healthy_loop's said 11.49 + 18.80 + 1.70 ms of
        # a 30.90 ms step, the sync's wait for a CPU counted in blocked as well)
        parts = [story.host_cpu_s, story.host_blocked_s, story.host_cpu_wait_s]
        assert sum(part or 0.0 for part in parts) <= story.host_wall_s + 1e-9, (path, parts)
        # AND the line shows the figures the story holds
        line = next(text for text in story_lines(story) if text.startswith("  host: "))
        if story.host_blocked_s:
            assert f"blocked in its sync {format_seconds(story.host_blocked_s)}" in line


def test_a_gpu_idle_most_of_each_step_is_never_called_device_bound(
    jax_xspace: Decoded, gpu_linked: dict[str, Path]
) -> None:
    # GIVEN the H100 JAX capture, whose GPU (decoded without xlaprof: the union of its events
    # in each step's ``train`` range) is busy under a tenth of every step after step 0
    windows = train_windows(jax_xspace)
    gpu = [(int(e.start_ns), int(e.end_ns)) for e in jax_xspace.on("/device:GPU")]
    for step, (start, end) in windows.items():
        if step > 0:
            assert clipped_union_ns(gpu, int(start), int(end)) < 0.1 * (end - start), step
    # WHEN it is analyzed
    story = _analyzed(gpu_linked[GPU_JAX]).story
    assert story is not None and story.steady_steps >= 8
    # THEN no steady step is device-bound, and the headline does not say one is
    assert story.bound != "device" and "device" not in story.bound_steps
    assert not any("device-bound" in line for line in story_lines(story))
