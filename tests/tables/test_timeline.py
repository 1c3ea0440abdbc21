"""The per-step timeline (``xlaprof.tables.timeline``): from a run's step rows and its trace.

Expected values come from the input: the sample runs' recorded steps and traced window, this
suite's independent decode of the H100 JAX capture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from decode import Decoded, gpu_in, train_windows, union_ns
from helpers import GPU_JAX, jax_cpu_sample, sample_run

from xlaprof.api import Analysis
from xlaprof.inputs.traces import load_trace
from xlaprof.rundir.reader import load_run
from xlaprof.tables.timeline import step_timeline

RUN = "recompile_varying_batch"


def test_timeline_of_the_sample_run() -> None:
    run = load_run(sample_run(RUN))
    timeline = step_timeline(run.step_rows(), load_trace(sample_run(RUN)).events)
    assert list(timeline["step"]) == list(range(12))
    assert list(timeline[timeline["source"] == "trace"]["step"]) == [4, 5]
    host_parts = ["python_tracing_s", "graph_build_s", "compile_s", "transfer_s", "device_wait_s"]
    total = timeline[host_parts].sum(axis=1)
    assert (total <= timeline["wall_s"] + 1e-9).all()
    # step 4 recompiled (batch 72): compile dominates it
    step4 = timeline.set_index("step").loc[4]
    assert step4["compile_s"] > 0.5 * step4["wall_s"]


@pytest.mark.parametrize("name", ["host_sync_item", RUN, "tracing_bound_tiny_ops"])
def test_a_traced_steps_wait_holds_the_time_its_sync_was_blocked(name: str) -> None:
    # GIVEN a sample run whose trace window holds steps 4 and 5, and its own step records:
    # the sync's wall, CPU time and wait for a CPU (steps.jsonl, as the session wrote them;
    # a sample run's older session recorded the step's wait, not the sync's share of it: the
    # sync waited for a CPU at most that long)
    run = load_run(sample_run(name))
    trace = load_trace(run.path)
    timeline = step_timeline(run.step_rows(), trace.events, trace.step_bounds).set_index("step")
    for row in run.step_rows():
        if timeline.loc[row.step, "source"] != "trace" or row.compiles or not row.sync_wall_s:
            continue
        assert row.sync_cpu_s is not None
        waited = row.sync_cpu_wait_s if row.sync_cpu_wait_s is not None else row.cpu_wait_s
        blocked = row.sync_wall_s - row.sync_cpu_s - (waited or 0.0)
        # WHEN the timeline takes the step from the trace THEN the time it was blocked is at
        # least what the sync's own clocks say (the trace's spans do not name a sync behind a
        # full queue), and never more than the host's wall for the step
        wait = timeline.loc[row.step, "device_wait_s"]
        assert wait >= max(blocked, 0.0) - 1e-9, (name, row.step, wait, blocked)
        assert wait <= timeline.loc[row.step, "host_wall_s"] + 1e-9


def test_traced_steps_span_boundary_to_boundary() -> None:
    # The first traced step has no events before its StepMarker: it must still begin when
    # profiling began, or its wall time shrinks to the marker's (a bug seen on this sample).
    run = load_run(sample_run("tracing_bound_tiny_ops"))
    trace = load_trace(run.path)
    timeline = step_timeline(run.step_rows(), trace.events, trace.step_bounds).set_index("step")
    steady_metrics = timeline[(timeline["source"] == "metrics") & (timeline.index >= 2)]
    typical = steady_metrics["wall_s"].median()
    for step in (4, 5):
        assert timeline.loc[step, "source"] == "trace"
        assert 0.7 * typical < timeline.loc[step, "wall_s"] < 1.3 * typical
        assert timeline.loc[step, "python_tracing_s"] > timeline.loc[step, "graph_build_s"]


def test_jax_timeline_shows_what_was_measured(
    gpu_linked: dict[str, Path], jax_xspace: Decoded
) -> None:
    timeline = Analysis(gpu_linked[GPU_JAX]).timeline().set_index("step")
    windows = train_windows(jax_xspace)
    # compile: JAX's backend_compile_and_load calls (each holds a PJRT_Client_Compile)
    compiles = [(e.start_ns, e.end_ns) for e in jax_xspace.named("backend_compile_and_load")]
    assert timeline.loc[0, "compile_s"] * 1e9 == pytest.approx(union_ns(compiles), abs=2)
    assert (timeline.loc[1:, "compile_s"] == 0).all()  # measured: no compile after step 0
    # not measured without torch_xla's runtime: absent, never 0.0
    for column in ("python_tracing_s", "graph_build_s", "transfer_s", "device_wait_s"):
        assert timeline[column].isna().all(), column
    assert timeline["tracing_s"].isna().all()
    # device busy: the GPU's events in the step (there is no XLA Modules line on a GPU)
    for step, window in windows.items():
        spans = [(e.start_ns, e.end_ns) for e in gpu_in(jax_xspace, window)]
        assert timeline.loc[step, "device_busy_s"] * 1e9 == pytest.approx(
            union_ns(spans), abs=len(spans)
        )


def test_timeline_busy_is_the_device_models_and_never_above_wall(jax_cpu_trace: Any) -> None:
    from xlaprof.pipeline import analyze_one

    result, _, _ = analyze_one(jax_cpu_sample())
    timeline = result.timeline.set_index("step")
    busy = jax_cpu_trace.device_steps().set_index("step")["busy_s"]
    for step in range(100, 110):
        assert timeline.loc[step, "device_busy_s"] == pytest.approx(busy[step])
        assert timeline.loc[step, "device_busy_s"] <= timeline.loc[step, "wall_s"]


def test_a_capture_without_a_stepping_line_has_its_compiles_not_measured_not_zero() -> None:
    from decode import decode_xspace
    from helpers import TPU, shared_trace

    # GIVEN the real TPU capture: its host plane holds the PJRT client's compile spans, but
    # no step marks (its steps are the device's module runs), so no host line is the stepping
    # thread's (decoded without xlaprof)
    path = shared_trace(TPU)
    decoded = decode_xspace(path)
    host = [e for e in decoded.events if e.plane.startswith("/host")]
    compiles = [e for e in host if e.name == "backend_compile"]
    assert compiles and sum(e.end_ns - e.start_ns for e in compiles) > 1e9
    assert not any(e.name.startswith("StepMarker") or "ProfilerStep" in e.name for e in host)
    # WHEN it is analyzed (its steps from the device's windows)
    from xlaprof.model.request import AnalysisRequest
    from xlaprof.pipeline import analyze

    (part,) = analyze(AnalysisRequest((path,))).parts
    timeline = part.timeline
    assert timeline is not None and len(timeline) > 100
    # THEN no step's compile is measured: the spans lie on no stepping line to read them on,
    # and "0.0 s" would say every step compiled nothing
    assert timeline["compile_s"].isna().all(), timeline["compile_s"].dropna().head()
