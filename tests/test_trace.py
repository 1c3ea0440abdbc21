"""Trace loading, steps, timeline and host skew, without the runtime."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import SAMPLES, cli

from xlaprof.errors import InputNotRecognized
from xlaprof.inputs.traces import load_trace
from xlaprof.parse.chrome_trace import chrome_trace_frame
from xlaprof.parse.xplane.schema import xspace_class
from xlaprof.rundir.reader import load_run
from xlaprof.tables.hosts import host_skew
from xlaprof.tables.timeline import step_timeline

RUN = SAMPLES / "runs" / "recompile_varying_batch"


def test_sample_run_trace_steps_come_from_the_window() -> None:
    trace = load_trace(RUN)  # --trace-steps 4:6 was used
    events = trace.events
    markers = events[events["name"] == "StepMarker"]
    assert list(markers["step"]) == [4, 5]
    assert set(events["step"].dropna().unique()) == {4, 5}
    assert (
        str(events["start_ns"].dtype) == "int64" and str(events["duration_ns"].dtype) == "float64"
    )
    for column in ("host", "plane", "plane_kind", "line", "name"):
        assert events[column].dtype == "category"
    assert set(events["plane_kind"].cat.categories) == {"host"}  # CPU traces: host planes only
    # XLA op names reach the hlo_op column on the CPU executor's lines
    assert events["hlo_op"].notna().sum() > 0
    compile_event = events[events["name"] == "XLAGraphExecutor::Compile"]
    assert len(compile_event) == 1 and int(compile_event["step"].iloc[0]) == 4  # batch 72


def test_chrome_trace_agrees_with_xplane() -> None:
    (json_file,) = RUN.glob("*/plugins/profile/*/*.trace.json.gz")
    chrome = chrome_trace_frame(json_file)
    xplane = load_trace(RUN).events
    for name in ("StepMarker", "XLAGraphExecutor::Compile"):
        assert (chrome["name"] == name).sum() == (xplane["name"] == name).sum()


def _tpu_like_xspace(path: Path, host_steps: int = 2) -> None:
    """An XSpace shaped like a TPU capture: host python line + device Steps/Modules/Ops."""
    space = xspace_class()()
    space.hostnames.append("tpu-vm-0")
    host = space.planes.add(id=1, name="/host:CPU")
    host.event_metadata[1].id, host.event_metadata[1].name = 1, "StepMarker"
    python = host.lines.add(id=1, name="python", timestamp_ns=1_000)
    for i in range(host_steps):  # steps end at 10 ms and 20 ms
        python.events.add(metadata_id=1, offset_ps=(i * 10 + 9) * 10**9, duration_ps=10**9)
    device = space.planes.add(id=2, name="/device:TPU:0")
    for key, name in ((1, "7"), (2, "8"), (3, "SyncTensorsGraph.123"), (4, "fusion.1")):
        device.event_metadata[key].id, device.event_metadata[key].name = key, name
    device.stat_metadata[1].id, device.stat_metadata[1].name = 1, "hlo_op"
    device.stat_metadata[2].id, device.stat_metadata[2].name = 2, "fusion.1"
    steps = device.lines.add(id=1, name="Steps", timestamp_ns=1_000)
    modules = device.lines.add(id=2, name="XLA Modules", timestamp_ns=1_000)
    ops = device.lines.add(id=3, name="XLA Ops", timestamp_ns=1_000)
    for index, step_meta in enumerate((1, 2)):
        begin = index * 10 * 10**9
        steps.events.add(metadata_id=step_meta, offset_ps=begin, duration_ps=8 * 10**9)
        modules.events.add(metadata_id=3, offset_ps=begin + 10**9, duration_ps=6 * 10**9)
        op = ops.events.add(metadata_id=4, offset_ps=begin + 2 * 10**9, duration_ps=10**9)
        op.stats.add(metadata_id=1, ref_value=2)
    path.write_bytes(space.SerializeToString())


def test_device_planes_of_a_tpu_shaped_trace(tmp_path: Path) -> None:
    path = tmp_path / "plugins" / "profile" / "t" / "tpu-vm-0.xplane.pb"
    path.parent.mkdir(parents=True)
    _tpu_like_xspace(path)
    trace = load_trace(tmp_path)
    events = trace.events
    device = events[events["plane_kind"] == "device"]
    assert set(device["plane"]) == {"/device:TPU:0"}
    # device events take the step of the Steps-line event they fall in
    ops = device[device["line"] == "XLA Ops"]
    assert list(ops["step"]) == [7, 8] and list(ops["hlo_op"]) == ["fusion.1", "fusion.1"]
    assert ops["args"].iloc[0] == {"hlo_op": "fusion.1"}  # ref stat resolved to its name
    timeline = step_timeline([], events[events["plane_kind"] == "device"])
    assert list(timeline["device_busy_s"]) == pytest.approx([0.006, 0.006])  # XLA Modules


def test_many_hosts_load_in_parallel_and_show_skew(tmp_path: Path) -> None:
    (source,) = RUN.glob("*/plugins/profile/*/*.xplane.pb")
    session = tmp_path / "plugins" / "profile" / "2026_01_01"
    session.mkdir(parents=True)
    for host in ("host-a_8466", "host-b_8466", "host-c_8466"):
        shutil.copy(source, session / f"{host}.xplane.pb")
    trace = load_trace(tmp_path, workers=2)
    assert trace.hosts == ["host-a:8466", "host-b:8466", "host-c:8466"]
    counts = trace.events.groupby("host", observed=True).size()
    assert counts.nunique() == 1  # the same capture three times
    skew = host_skew(trace.step_times())
    assert list(skew["skew"]) == [0.0, 0.0] and set(skew["hosts"]) == {3}


def test_timeline_of_the_sample_run() -> None:
    run = load_run(RUN)
    timeline = step_timeline(run.step_rows(), load_trace(RUN).events)
    assert list(timeline["step"]) == list(range(12))
    assert list(timeline[timeline["source"] == "trace"]["step"]) == [4, 5]
    host_parts = ["python_tracing_s", "graph_build_s", "compile_s", "transfer_s", "device_wait_s"]
    total = timeline[host_parts].sum(axis=1)
    assert (total <= timeline["wall_s"] + 1e-9).all()
    # step 4 recompiled (batch 72): compile dominates it
    step4 = timeline.set_index("step").loc[4]
    assert step4["compile_s"] > 0.5 * step4["wall_s"]


def test_no_trace_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputNotRecognized, match="no trace here"):
        load_trace(tmp_path)
    result = cli("view", str(tmp_path))
    assert result.returncode == 7 and "no trace to view" in result.stderr


def test_traced_steps_span_boundary_to_boundary() -> None:
    # The first traced step has no events before its StepMarker: it must still begin when
    # profiling began, or its wall time shrinks to the marker's (a bug seen on this sample).
    run = load_run(SAMPLES / "runs" / "tracing_bound_tiny_ops")
    trace = load_trace(run.path)
    timeline = step_timeline(run.step_rows(), trace.events, trace.step_bounds).set_index("step")
    steady_metrics = timeline[(timeline["source"] == "metrics") & (timeline.index >= 2)]
    typical = steady_metrics["wall_s"].median()
    for step in (4, 5):
        assert timeline.loc[step, "source"] == "trace"
        assert 0.7 * typical < timeline.loc[step, "wall_s"] < 1.3 * typical
        assert timeline.loc[step, "python_tracing_s"] > timeline.loc[step, "graph_build_s"]
