"""Per-device steps, busy and idle time (``xlaprof.tables.device.steps``).

Expected values come from the input, never from what xlaprof printed: XProf's own converters on
the same file (``op_profile``, ``overview_page``, ``framework_op_stats``,
``input_pipeline_analyzer``), this suite's independent decode of the captures (``decode.py``),
the H100 script's own record of its steps (``capture_gpu.json``), and the events written into a
capture built here.

How XProf bounds the JAX capture's steps (verified below to the nanosecond): it numbers them by
the ``train`` step markers (0..11) and, having more than five, drops the first and the last
(``maybe_drop_incomplete_steps``): steps 1..10. Its step g is the device events XProf groups
with step g: those of host step g except the step's input copy (``MemcpyH2D``, issued when the
step begins), plus the input copy of step g+1. Its step time is their span, its device compute
the union of them. xlaprof's step g is the host's ``train`` range (the annotation the script
wrote), its busy the union of the device events that start in it. So the 30 ms the host slept
before step 7's input copy is XProf's step 6 and xlaprof's step 7, the step the script slowed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from decode import Decoded, close, gpu_in, profiler_steps, rows, train_windows, union_ns, xprof_tool
from helpers import SHARED_XPLANES, TPU, TRACES, cli, jax_cpu_sample, shared_trace

from xlaprof.inputs.traces import load_trace
from xlaprof.tables import device as device_model
from xlaprof.tables.hosts import host_skew
from xlaprof.tables.intervals import Coverage

# XProf's stepTimeMs and deviceComputeTimeMs have six decimals: one nanosecond.
XPROF_NS = 1e-6  # ms
# The script reads time.perf_counter just outside each step's annotation (JAX) or between
# prof.step() calls (Kineto): the two clocks' windows differ by the annotation's own enter and
# exit and the profiler's step bookkeeping, tens of microseconds, never a tenth of a millisecond.
SCRIPT_CLOCK_S = 1e-4


@pytest.mark.parametrize("name", SHARED_XPLANES)
def test_device_busy_and_duty_cycle_agree_with_xprof(
    traces: dict[str, Any], xprof: dict[tuple[str, str], Any], name: str
) -> None:
    profile = xprof[(name, "op_profile")]["byProgram"]
    total_ps = profile["metrics"]["rawTime"]
    idle_ps = sum(c["metrics"]["rawTime"] for c in profile["children"] if c["name"] == "IDLE")
    utilization = traces[name].device_utilization()
    assert close(utilization["span_s"].sum() * 1e12, total_ps)
    frame = device_model.device_events(traces[name].events)
    compute = frame[frame["compute"]]
    if name == TPU:
        # XProf's duty cycle: union of XLA Ops minus off-duty categories, per chip
        assert close(utilization["busy_s"].sum() * 1e12, total_ps - idle_ps)
        duty = float(xprof[(name, "overview_page")][0]["p"]["device_duty_cycle_percent"][:-1])
        mine = 100 * utilization["busy_s"].sum() / utilization["span_s"].sum()
        assert abs(mine - duty) < 0.1  # the page rounds to 0.1%
    else:
        # XProf counts only kernels attributed to an XLA op as busy; xlaprof also counts the
        # runtime's own kernels (e.g. __amd_rocclr_copyBuffer) as busy copies
        attributed = compute[compute["hlo_op"].notna()]
        union = sum(
            Coverage.of(g["start_ns"].to_numpy(), g["end_ns"].to_numpy()).total
            for _, g in attributed.groupby("device", observed=True)
        )
        assert close(union * 1e3, total_ps - idle_ps)
        assert utilization["busy_s"].sum() * 1e12 >= union * 1e3
    # framework_op_stats' device rows (without IDLE) add up to the same busy time
    device_rows = [
        r
        for r in rows(xprof[(name, "framework_op_stats")][0])
        if r["host_or_device"] == "Device" and r["type"] != "IDLE"
    ]
    ops = traces[name].device_ops()
    known = ops[ops["hlo_category"].notna() | ops["name"].isin(frame["hlo_op"].dropna())]
    assert close(known["total_s"].sum() * 1e6, sum(r["total_time"] for r in device_rows))


@pytest.mark.parametrize("name", SHARED_XPLANES)
def test_no_step_markers_fall_back_to_module_executions_as_xprof_says(
    traces: dict[str, Any], xprof: dict[tuple[str, str], Any], name: str
) -> None:
    # XProf: "No step marker observed and hence the step time is unknown"
    step_table = xprof[(name, "overview_page")][1]["p"]
    assert float(step_table["steptime_ms_average"]) == 0.0
    steps = traces[name].device_steps()
    sources = set(steps["step_source"])
    if name == TPU:
        # every chip's own XLA Modules executions (jit_f x 100, jit__psum x 3, ...)
        assert sources == {"module executions"}
        modules = traces[name].events
        modules = modules[modules["line"] == "XLA Modules"]
        counts = modules.groupby("device", observed=True).size().to_dict()
        assert steps.groupby("device").size().to_dict() == counts
    else:
        assert sources == {"whole capture"} and steps["step"].isna().all()
    assert (steps["busy_s"] <= steps["wall_s"] + 1e-12).all()
    # idle is the rest of each step: what the step's wall time leaves after its busy time
    assert list(steps["idle_s"]) == pytest.approx(list(steps["wall_s"] - steps["busy_s"]), abs=1e-9)


def test_two_hosts_with_a_steps_line_per_device_give_per_device_steps(two_hosts: Path) -> None:
    trace = load_trace(two_hosts)
    assert trace.hosts == ["host-a", "host-b"]  # from XSpace.hostnames
    steps = trace.device_steps().set_index("device")
    # one step per device, each device's own: never GPU:4's start stitched to GPU:6's end
    assert list(steps.index) == ["GPU:4", "GPU:6"]
    assert set(steps["step_source"]) == {"Steps line"}
    assert steps.loc["GPU:4", "wall_s"] == pytest.approx(0.0199)
    assert steps.loc["GPU:6", "wall_s"] == pytest.approx(0.0213)
    # busy: the kernels on the stream (GPU planes have no XLA Modules line)
    assert steps.loc["GPU:4", "busy_s"] == pytest.approx(0.011)
    assert steps.loc["GPU:6", "busy_s"] == pytest.approx(0.0148)
    assert steps.loc["GPU:6", "idle_s"] == pytest.approx(0.0213 - 0.0148)
    assert steps.loc["GPU:6", "matmul_conv_s"] == pytest.approx(0.0088)
    # step times per host come from the devices' steps, so host skew is there
    times = trace.step_times().set_index("host")
    assert times.loc["host-b", "wall_ms"] == pytest.approx(21.3)
    assert times.loc["host-b", "wall_s"] == pytest.approx(0.0213)  # seconds, as every table
    skew = host_skew(trace.step_times())
    assert skew.iloc[0]["slowest_host"] == "host-b"
    assert skew.iloc[0]["skew"] == pytest.approx(21.3 / 19.9 - 1)
    # event step numbers are per device too
    device = trace.events[trace.events["plane_kind"] == "device"]
    assert set(device["step"].dropna()) == {1}


def test_two_hosts_device_time_agrees_with_xprof(two_hosts: Path) -> None:
    # XProf's op_profile on both hosts: the devices' time from first to last kernel. (With no
    # HLO protos in this built capture XProf attributes no kernel to an op, so it calls all of
    # that time idle; busy is checked against the kernels written above instead.)
    from xprof.convert.raw_to_tool_data import xspace_to_tool_data

    files = sorted(str(p) for p in two_hosts.rglob("*.xplane.pb"))
    data, _ = xspace_to_tool_data(files, "op_profile", {"use_saved_result": False})
    total_ps = json.loads(data)["byProgram"]["metrics"]["rawTime"]
    utilization = load_trace(two_hosts).device_utilization()
    assert close(utilization["span_s"].sum() * 1e12, total_ps)
    assert utilization["busy_s"].sum() == pytest.approx(0.011 + 0.0148)


def test_jax_steps_are_the_annotated_steps_and_their_wall_times(
    jax_trace: Any, jax_xspace: Decoded, gpu_facts: dict[str, Any]
) -> None:
    # GIVEN the script's 12 steps, each inside StepTraceAnnotation("train", step_num=i)
    facts = gpu_facts["jax"]
    windows = train_windows(jax_xspace)
    assert list(windows) == facts["steps_annotated"] == list(range(12))
    # THEN the GPU's steps are those 12 host steps, boundary to boundary
    steps = jax_trace.device_steps().set_index("step")
    assert list(steps.index) == facts["steps_annotated"]
    assert set(steps["step_source"]) == {"host steps"}
    for step, (start, end) in windows.items():
        wall = steps.loc[step, "wall_s"]
        assert wall * 1e9 == pytest.approx(end - start, abs=2)
        # the script's own clock, read just outside the annotation, agrees
        script = facts["host_wall_s_per_step"][step]
        assert 0 <= script - wall < SCRIPT_CLOCK_S, step
    # the slowest steady step is the one the script slept in
    steady = steps.loc[1:]
    assert int(steady["wall_s"].idxmax()) == facts["slow_host_step"] == 7


def test_jax_busy_per_step_is_the_union_of_the_gpu_events_in_the_step(
    jax_trace: Any, jax_xspace: Decoded
) -> None:
    steps = jax_trace.device_steps().set_index("step")
    for step, window in train_windows(jax_xspace).items():
        spans = [(e.start_ns, e.end_ns) for e in gpu_in(jax_xspace, window)]
        assert steps.loc[step, "busy_s"] * 1e9 == pytest.approx(union_ns(spans), abs=len(spans))
        assert steps.loc[step, "idle_s"] == pytest.approx(
            steps.loc[step, "wall_s"] - steps.loc[step, "busy_s"]
        )


def test_xprof_numbers_steps_as_the_annotations_and_drops_the_first_and_last(
    input_pipeline: dict[int, dict[str, Any]], jax_trace: Any, gpu_facts: dict[str, Any]
) -> None:
    # XProf: 12 steps (> 5), the first and last dropped as possibly incomplete
    assert sorted(k for k in input_pipeline if k >= 0) == list(range(1, 11))
    # xlaprof keeps them: step 0 (the compile) and step 11 happened and were annotated
    assert sorted(jax_trace.device_steps()["step"]) == gpu_facts["jax"]["steps_annotated"]


def test_xprof_step_time_and_device_compute_agree_once_its_grouping_is_applied(
    input_pipeline: dict[int, dict[str, Any]],
    jax_trace: Any,
    jax_xspace: Decoded,
    gpu_facts: dict[str, Any],
) -> None:
    # GIVEN XProf's per-step rows and xlaprof's per-step busy time
    windows = train_windows(jax_xspace)
    steps = jax_trace.device_steps().set_index("step")
    for step in range(1, 11):
        own = [e for e in gpu_in(jax_xspace, windows[step]) if e.name != "MemcpyH2D"]
        (copy,) = gpu_in(jax_xspace, windows[step], "MemcpyH2D")
        (next_copy,) = gpu_in(jax_xspace, windows[step + 1], "MemcpyH2D")
        group = [(e.start_ns, e.end_ns) for e in [*own, next_copy]]
        # THEN XProf's step is step g's device events with g+1's input copy (see the docstring),
        # to the nanosecond
        span_ms = (max(e for _, e in group) - min(s for s, _ in group)) / 1e6
        assert input_pipeline[step]["stepTimeMs"] == pytest.approx(span_ms, abs=XPROF_NS)
        # AND its device compute is xlaprof's busy time with that one copy moved: the input
        # copy runs alone (~0.8 ms before the step's kernels), so it adds its own duration
        xprof_ms = input_pipeline[step]["deviceComputeTimeMs"]
        moved_ms = (
            steps.loc[step, "busy_s"] * 1e3
            - (copy.end_ns - copy.start_ns) / 1e6
            + (next_copy.end_ns - next_copy.start_ns) / 1e6
        )
        assert xprof_ms == pytest.approx(moved_ms, abs=2 * XPROF_NS), step
    # the 30 ms sleep: XProf's step 6 (before step 7's input copy), xlaprof's step 7
    steady = {k: v["stepTimeMs"] for k, v in input_pipeline.items() if k >= 0}
    assert max(steady, key=steady.get) == gpu_facts["jax"]["slow_host_step"] - 1
    assert steps.loc[1:10, "wall_s"].idxmax() == gpu_facts["jax"]["slow_host_step"]


def test_kineto_steps_come_from_profiler_step_ranges(
    torch_trace: Any, kineto_events: list[dict[str, Any]], gpu_facts: dict[str, Any]
) -> None:
    # GIVEN the ProfilerStep#3..#8 ranges on the CPU thread (schedule wait=1, warmup=2,
    # active=6), the GPU's mirror of each, and the script's record of them
    host = profiler_steps(kineto_events, "user_annotation")
    mirror = profiler_steps(kineto_events, "gpu_user_annotation")
    facts = gpu_facts["torch"]
    assert sorted(host) == sorted(mirror) == list(range(3, 9))
    assert {f"ProfilerStep#{n}" for n in host} == set(facts["profiler_steps_in_trace"])
    # THEN xlaprof's steps are those, numbered as the trace numbers them, boundary to boundary
    bounds = torch_trace.step_bounds.set_index("step")
    assert list(bounds.index) == list(range(3, 9))
    steps = torch_trace.device_steps().set_index("step")
    assert set(steps["step_source"]) == {"host steps"} and list(steps.index) == list(host)
    for step, (start, end) in host.items():
        assert bounds.loc[step, "start_ns"] == pytest.approx(start * 1000, abs=1)
        assert steps.loc[step, "wall_s"] * 1e6 == pytest.approx(end - start, abs=2e-3)
        # the script's clock: its window lies inside the range between two prof.step() calls
        script = facts["host_wall_s_per_step"][step]
        assert 0 <= steps.loc[step, "wall_s"] - script < SCRIPT_CLOCK_S, step
    # each step's GPU work (36 kernels, copies and sets) runs inside that step's host range, so
    # it is counted in its step. The GPU's mirror range holds only the first 13 of them: it is
    # no step window (it would hide most of the GPU's work and all of its waiting).
    gpu = [
        e
        for e in kineto_events
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    for step, (start, end) in host.items():
        mine = [e for e in gpu if start <= e["ts"] < end]
        assert len(mine) == 36 and all(e["ts"] + e["dur"] <= end for e in mine)
        assert len([e for e in mine if mirror[step][0] <= e["ts"] < mirror[step][1]]) == 13
        busy = union_ns([(e["ts"] * 1000, (e["ts"] + e["dur"]) * 1000) for e in mine]) / 1e9
        assert steps.loc[step, "busy_s"] == pytest.approx(busy, abs=len(mine) * 1e-9)
    assert len(gpu) == 6 * 36  # none outside the recorded steps


def test_tpu_busy_is_on_the_device_clock_like_xprofs_op_profile(
    traces: dict[str, Any], tmp_path: Path
) -> None:
    profile = xprof_tool(shared_trace(TPU), "op_profile", tmp_path)["byProgram"]
    idle_ps = sum(c["metrics"]["rawTime"] for c in profile["children"] if c["name"] == "IDLE")
    busy_ps = profile["metrics"]["rawTime"] - idle_ps
    # THEN the union of ops on the device clock is XProf's busy time to the microsecond
    assert traces[TPU].device_utilization()["busy_s"].sum() * 1e12 == pytest.approx(
        busy_ps, abs=1e6
    )
    # AND every step's causes add up to its wall time, busy never above wall
    table = traces[TPU].bottlenecks()
    causes = [c for c in table.columns if c.endswith("_s") and c not in ("wall_s", "busy_s")]
    assert ((table[causes].sum(axis=1) - table["wall_s"]).abs() < 1e-6).all()
    steps = traces[TPU].device_steps()
    assert (steps["busy_s"] <= steps["wall_s"] + 1e-9).all()
    categories = [
        c for c in steps.columns if c.endswith("_s") and c not in ("wall_s", "busy_s", "idle_s")
    ]
    assert (steps[categories].sum(axis=1) <= steps["busy_s"] + 1e-6).all()


def test_jax_cpu_steps_are_xprofs_to_the_nanosecond(jax_cpu_trace: Any, tmp_path: Path) -> None:
    steps = rows(xprof_tool(jax_cpu_sample(), "input_pipeline_analyzer", tmp_path)[1], strict=False)
    expected = {int(r["stepnum"].split()[-1]): r["stepTimeMs"] for r in steps}
    assert set(expected) == set(range(101, 109))  # XProf drops the first and last step
    mine = jax_cpu_trace.step_times().set_index("step")
    for step, ms in expected.items():
        assert mine.loc[step, "wall_ms"] == pytest.approx(ms, abs=1e-3)
        assert mine.loc[step, "wall_s"] == pytest.approx(ms / 1e3, abs=1e-6)


# The public TensorFlow multi-GPU capture (tensorflow/profiler demo GPU-multi-worker), when the
# shared folder has it (capture report, section 3.2).
TF_GPU = TRACES / "tensorflow_gpu_multi_worker.xplane.pb"


@pytest.mark.skipif(not TF_GPU.exists(), reason="the TensorFlow multi-GPU capture is not here")
def test_tensorflow_multi_gpu_steps_are_per_device_never_stitched() -> None:
    trace = load_trace(TF_GPU)
    steps = trace.step_times(per_device=True)
    steps = steps[steps["step"].notna()]
    # XProf: step 0 is 21.31 ms (GPU:6); GPU:4's is 19.87 ms
    assert steps.set_index("device").loc["GPU:6", "wall_ms"] == pytest.approx(21.310352, rel=1e-4)
    assert (steps["wall_ms"] < 25).all()
    done = cli("analyze", "--json", str(TF_GPU))
    timeline = json.loads(done.stdout)["timeline"]
    assert timeline[0]["wall_s"] == pytest.approx(0.021310352, rel=1e-4)
