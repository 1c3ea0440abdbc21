"""Real NVIDIA H100 captures with step markers (``sample_traces/gpu``): steps, busy, verdicts.

Expected values come from the input, never from what xlaprof prints:

- the capture script's own record (``capture_gpu.json``: which steps exist, which step slept
  30 ms on the host, each step's wall time on the script's clock);
- an independent decode in this file: ``gzip`` + ``json`` for the Kineto trace (the
  ``ProfilerStep#N`` events' own ``ts``/``dur``), a minimal protobuf wire decode for the XSpace
  (no ``xplane_pb2`` ships with XProf or torch_xla);
- XProf's own ``input_pipeline_analyzer`` on the JAX capture, run on a link in a temporary
  folder (XProf writes a cache file beside its input, never beside the capture in the repo).

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

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import REPO, cli, link_each

from xlaprof.api import Analysis
from xlaprof.inputs.traces import load_trace
from xlaprof.tables import device as device_model

GPU = REPO / "sample_traces" / "gpu"
JAX = "jax_mlp_steps.xplane.pb"
TORCH = "torch_mlp_steps.pt.trace.json.gz"
FACTS = json.loads((GPU / "capture_gpu.json").read_text())
# XProf's stepTimeMs and deviceComputeTimeMs have six decimals: one nanosecond.
XPROF_NS = 1e-6  # ms
# The script reads time.perf_counter just outside each step's annotation (JAX) or between
# prof.step() calls (Kineto): the two clocks' windows differ by the annotation's own enter and
# exit and the profiler's step bookkeeping, tens of microseconds, never a tenth of a millisecond.
SCRIPT_CLOCK_S = 1e-4


# ---------------------------------------------------------------- independent decodes


def _varint(data: memoryview, index: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[index]
        index += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, index
        shift += 7


def _fields(data: memoryview) -> Any:
    """(field number, value) of one protobuf message: ints for varints, bytes views else."""
    index = 0
    while index < len(data):
        key, index = _varint(data, index)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, index = _varint(data, index)
        elif wire == 2:
            length, index = _varint(data, index)
            value, index = data[index : index + length], index + length
        elif wire == 1:
            value, index = data[index : index + 8], index + 8
        elif wire == 5:
            value, index = data[index : index + 4], index + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield number, value


@dataclass
class Event:
    plane: str
    line: str
    name: str
    start_ns: float
    end_ns: float


@dataclass
class Decoded:
    events: list[Event] = field(default_factory=list)

    def named(self, name: str) -> list[Event]:
        return [e for e in self.events if e.name == name]

    def on(self, prefix: str) -> list[Event]:
        return [e for e in self.events if e.plane.startswith(prefix)]


def decode_xspace(path: Path) -> Decoded:
    """XSpace.planes(1) -> XPlane{name 2, lines 3, event_metadata 4}; XLine{name 2,
    timestamp_ns 3, events 4}; XEvent{metadata_id 1, offset_ps 2, duration_ps 3};
    event_metadata is a map entry {key 1, value 2: XEventMetadata{id 1, name 2}}."""
    decoded = Decoded()
    for number, plane_bytes in _fields(memoryview(path.read_bytes())):
        if number != 1:
            continue
        name, lines, names = "", [], {}
        for key, value in _fields(plane_bytes):
            if key == 2:
                name = bytes(value).decode()
            elif key == 3:
                lines.append(value)
            elif key == 4:
                entry = dict(_fields(value))
                meta = dict(_fields(entry[2]))
                names[entry[1]] = bytes(meta.get(2, b"")).decode()
        for line_bytes in lines:
            line = {"name": "", "ts": 0, "events": []}
            for key, value in _fields(line_bytes):
                if key == 2:
                    line["name"] = bytes(value).decode()
                elif key == 3:
                    line["ts"] = value
                elif key == 4:
                    line["events"].append(dict(_fields(value)))
            for event in line["events"]:
                start = line["ts"] + event.get(2, 0) / 1000
                decoded.events.append(
                    Event(
                        name,
                        line["name"],
                        names.get(event.get(1, 0), ""),
                        start,
                        start + event.get(3, 0) / 1000,
                    )
                )
    return decoded


def decode_kineto(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as handle:
        return json.load(handle)["traceEvents"]


def union_ns(spans: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        start = max(start, reach)
        if end > start:
            total += end - start
            reach = end
    return total


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def linked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each capture linked into its own temporary folder: nothing is written next to them."""
    root = tmp_path_factory.mktemp("gpu")
    return link_each([JAX, TORCH], GPU, root)


@pytest.fixture(scope="module")
def xspace() -> Decoded:
    return decode_xspace(GPU / JAX)


@pytest.fixture(scope="module")
def kineto() -> list[dict[str, Any]]:
    return decode_kineto(GPU / TORCH)


@pytest.fixture(scope="module")
def jax_trace(linked: dict[str, Path]) -> Any:
    return load_trace(linked[JAX])


@pytest.fixture(scope="module")
def torch_trace(linked: dict[str, Path]) -> Any:
    return load_trace(linked[TORCH])


@pytest.fixture(scope="module")
def pipeline(linked: dict[str, Path]) -> dict[int, dict[str, Any]]:
    """XProf's input_pipeline_analyzer on the JAX capture: its per-step rows by step number,
    and its conclusion under the key -1."""
    from xprof.convert.raw_to_tool_data import xspace_to_tool_data

    data, _ = xspace_to_tool_data(
        [str(linked[JAX])], "input_pipeline_analyzer", {"use_saved_result": False}
    )
    table = json.loads(data)[1]
    columns = [c["id"] for c in table["cols"]]
    rows = {}
    for row in table["rows"]:
        values = dict(zip(columns, [cell.get("v") for cell in row["c"]], strict=True))
        rows[int(values["stepnum"])] = values
    rows[-1] = table["p"]
    return rows


def train_windows(xspace: Decoded) -> dict[int, tuple[float, float]]:
    """The script's ``StepTraceAnnotation("train", step_num=i)`` ranges, in order (0..11)."""
    trains = sorted(xspace.named("train"), key=lambda e: e.start_ns)
    return {i: (e.start_ns, e.end_ns) for i, e in enumerate(trains)}


def gpu_in(xspace: Decoded, window: tuple[float, float], name: str | None = None) -> list[Event]:
    return [
        e
        for e in xspace.on("/device:GPU")
        if window[0] <= e.start_ns < window[1] and (name is None or e.name == name)
    ]


# ---------------------------------------------------------------- the JAX capture


def test_jax_capture_loads_every_event_of_the_independent_decode(
    jax_trace: Any, xspace: Decoded
) -> None:
    events = jax_trace.events
    assert len(events) == len(xspace.events) == 64_323
    # the GPU plane names its device (gpu_device_name), as the script's record does
    assert list(jax_trace.devices["type"]) == [FACTS["jax"]["device_kind"]]
    for plane in ("/device:GPU:0", "/host:CPU"):
        assert (events["plane"] == plane).sum() == len(xspace.on(plane))


def test_jax_steps_are_the_annotated_steps_and_their_wall_times(
    jax_trace: Any, xspace: Decoded
) -> None:
    # GIVEN the script's 12 steps, each inside StepTraceAnnotation("train", step_num=i)
    facts = FACTS["jax"]
    windows = train_windows(xspace)
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
    jax_trace: Any, xspace: Decoded
) -> None:
    steps = jax_trace.device_steps().set_index("step")
    for step, window in train_windows(xspace).items():
        spans = [(e.start_ns, e.end_ns) for e in gpu_in(xspace, window)]
        assert steps.loc[step, "busy_s"] * 1e9 == pytest.approx(union_ns(spans), abs=len(spans))
        assert steps.loc[step, "idle_s"] == pytest.approx(
            steps.loc[step, "wall_s"] - steps.loc[step, "busy_s"]
        )


def test_xprof_numbers_steps_as_the_annotations_and_drops_the_first_and_last(
    pipeline: dict[int, dict[str, Any]], jax_trace: Any
) -> None:
    # XProf: 12 steps (> 5), the first and last dropped as possibly incomplete
    assert sorted(k for k in pipeline if k >= 0) == list(range(1, 11))
    # xlaprof keeps them: step 0 (the compile) and step 11 happened and were annotated
    assert sorted(jax_trace.device_steps()["step"]) == FACTS["jax"]["steps_annotated"]


def test_xprof_step_time_and_device_compute_agree_once_its_grouping_is_applied(
    pipeline: dict[int, dict[str, Any]], jax_trace: Any, xspace: Decoded
) -> None:
    # GIVEN XProf's per-step rows and xlaprof's per-step busy time
    windows = train_windows(xspace)
    steps = jax_trace.device_steps().set_index("step")
    for step in range(1, 11):
        own = [e for e in gpu_in(xspace, windows[step]) if e.name != "MemcpyH2D"]
        (copy,) = gpu_in(xspace, windows[step], "MemcpyH2D")
        (next_copy,) = gpu_in(xspace, windows[step + 1], "MemcpyH2D")
        group = [(e.start_ns, e.end_ns) for e in [*own, next_copy]]
        # THEN XProf's step is step g's device events with g+1's input copy (see the docstring),
        # to the nanosecond
        span_ms = (max(e for _, e in group) - min(s for s, _ in group)) / 1e6
        assert pipeline[step]["stepTimeMs"] == pytest.approx(span_ms, abs=XPROF_NS)
        # AND its device compute is xlaprof's busy time with that one copy moved: the input
        # copy runs alone (~0.8 ms before the step's kernels), so it adds its own duration
        xprof_ms = pipeline[step]["deviceComputeTimeMs"]
        moved_ms = (
            steps.loc[step, "busy_s"] * 1e3
            - (copy.end_ns - copy.start_ns) / 1e6
            + (next_copy.end_ns - next_copy.start_ns) / 1e6
        )
        assert xprof_ms == pytest.approx(moved_ms, abs=2 * XPROF_NS), step
    # the 30 ms sleep: XProf's step 6 (before step 7's input copy), xlaprof's step 7
    steady = {k: v["stepTimeMs"] for k, v in pipeline.items() if k >= 0}
    assert max(steady, key=steady.get) == FACTS["jax"]["slow_host_step"] - 1
    assert steps.loc[1:10, "wall_s"].idxmax() == FACTS["jax"]["slow_host_step"]


def test_host_bound_verdict_agrees_with_xprofs_input_bound_conclusion(
    pipeline: dict[int, dict[str, Any]], jax_trace: Any
) -> None:
    # XProf: "POTENTIALLY input-bound because 98.1% of the total step time sampled is spent on
    # 'All Others' time (which could be due to I/O or Python execution or both)"
    conclusion = pipeline[-1]["input_conclusion"]
    assert "input-bound" in conclusion
    theirs = float(re.search(r"([\d.]+)% of the total step time", conclusion).group(1))
    # xlaprof over the same steps: the share of step time the device idles. The windows differ
    # by the grouping above (a few % of each step), each holding the same ~176 us of device
    # work: the shares differ by far less than XProf's 0.1% rounding.
    table = jax_trace.tracing_vs_device().set_index("step")
    same = table.loc[1:10]
    mine = 100 * same["device_idle_s"].sum() / same["host_wall_s"].sum()
    assert abs(mine - theirs) <= 0.1
    # every step is host-bound, and none is called tracing: JAX has no lazy tracing
    assert set(table["bound"]) == {"host"}
    assert not table["lazy_tensor"].any()
    assert table["tracing_s"].isna().all() and table["tracing_bound"].isna().all()
    # the step the host slept in idles the device at least the 30 ms it slept, more than the
    # median step
    facts = FACTS["jax"]
    extra = table.loc[facts["slow_host_step"], "device_idle_s"] - same["device_idle_s"].median()
    assert extra >= facts["slow_host_extra_s"]


def test_autotuning_kernels_are_the_gpu_work_inside_the_compile_calls(
    jax_trace: Any, xspace: Decoded
) -> None:
    # GIVEN the host's PJRT_Client_Compile calls (the PJRT C API's compile) and the GPU events
    # that start inside them: XLA's autotuner timing candidates, redzone checks, delay kernels
    compiles = [(e.start_ns, e.end_ns) for e in xspace.named("PJRT_Client_Compile")]
    assert len(compiles) == 2  # jit_stage and jit_train_step, both in step 0
    inside = [e for e in xspace.on("/device:GPU") if any(a <= e.start_ns < b for a, b in compiles)]
    assert len(inside) == 2113
    # THEN exactly those are category autotune, all in step 0
    frame = device_model.device_events(jax_trace.events)
    assert int((frame["category"] == "autotune").sum()) == len(inside)
    steps = jax_trace.device_steps().set_index("step")
    assert steps.loc[0, "autotune_s"] > 0
    assert (steps.loc[1:, "autotune_s"] == 0).all()
    # an op's autotuning runs are a row of their own: the program ran each op once per step
    ops = jax_trace.device_ops()
    program = ops[(ops["category"] != "autotune") & ops["name"].str.startswith("gemm_fusion")]
    assert set(program["occurrences"]) == {len(steps)}


def test_jax_timeline_shows_what_was_measured(linked: dict[str, Path], xspace: Decoded) -> None:
    timeline = Analysis(linked[JAX]).timeline().set_index("step")
    windows = train_windows(xspace)
    # compile: JAX's backend_compile_and_load calls (each holds a PJRT_Client_Compile)
    compiles = [(e.start_ns, e.end_ns) for e in xspace.named("backend_compile_and_load")]
    assert timeline.loc[0, "compile_s"] * 1e9 == pytest.approx(union_ns(compiles), abs=2)
    assert (timeline.loc[1:, "compile_s"] == 0).all()  # measured: no compile after step 0
    # not measured without torch_xla's runtime: absent, never 0.0
    for column in ("python_tracing_s", "graph_build_s", "transfer_s", "device_wait_s"):
        assert timeline[column].isna().all(), column
    assert timeline["tracing_s"].isna().all()
    # device busy: the GPU's events in the step (there is no XLA Modules line on a GPU)
    for step, window in windows.items():
        spans = [(e.start_ns, e.end_ns) for e in gpu_in(xspace, window)]
        assert timeline.loc[step, "device_busy_s"] * 1e9 == pytest.approx(
            union_ns(spans), abs=len(spans)
        )


# ---------------------------------------------------------------- the Kineto capture


def profiler_steps(kineto: list[dict[str, Any]], cat: str) -> dict[int, tuple[float, float]]:
    """``ProfilerStep#N`` ranges of one category, by N, in trace microseconds."""
    return {
        int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"])
        for e in kineto
        if e.get("ph") == "X" and e.get("cat") == cat and e["name"].startswith("ProfilerStep#")
    }


def test_kineto_capture_loads_every_timed_event(
    torch_trace: Any, kineto: list[dict[str, Any]]
) -> None:
    timed = [e for e in kineto if e.get("ph") in ("X", "B", "E")]
    assert len(torch_trace.events) == len(timed) == 1520


def test_kineto_steps_come_from_profiler_step_ranges(
    torch_trace: Any, kineto: list[dict[str, Any]]
) -> None:
    # GIVEN the ProfilerStep#3..#8 ranges on the CPU thread (schedule wait=1, warmup=2,
    # active=6), the GPU's mirror of each, and the script's record of them
    host = profiler_steps(kineto, "user_annotation")
    mirror = profiler_steps(kineto, "gpu_user_annotation")
    facts = FACTS["torch"]
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
        for e in kineto
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    for step, (start, end) in host.items():
        mine = [e for e in gpu if start <= e["ts"] < end]
        assert len(mine) == 36 and all(e["ts"] + e["dur"] <= end for e in mine)
        assert len([e for e in mine if mirror[step][0] <= e["ts"] < mirror[step][1]]) == 13
        busy = union_ns([(e["ts"] * 1000, (e["ts"] + e["dur"]) * 1000) for e in mine]) / 1e9
        assert steps.loc[step, "busy_s"] == pytest.approx(busy, abs=len(mine) * 1e-9)
    assert len(gpu) == 6 * 36  # none outside the recorded steps


def test_kineto_steps_are_host_bound_not_tracing(torch_trace: Any) -> None:
    # PyTorch eager: no lazy-tensor runtime, so no tracing; the GPU idles most of each step
    # while the host launches the next kernels (busy ~0.33 ms of ~1.8 ms)
    table = torch_trace.tracing_vs_device()
    assert list(table["step"]) == list(range(3, 9))
    assert not table["lazy_tensor"].any() and table["tracing_s"].isna().all()
    assert set(table["bound"]) == {"host"}
    assert (table["device_idle_s"] > table["device_busy_s"]).all()


def test_step_numbers_survive_damaged_profiler_steps(tmp_path: Path) -> None:
    # a number past int64 and a ProfilerStep without a number are not steps; the rest still are
    events = [
        {"ph": "M", "name": "process_labels", "pid": 1, "args": {"labels": "CPU"}},
        {"ph": "X", "name": "ProfilerStep#4", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0},
        {"ph": "X", "name": "ProfilerStep#" + "9" * 30, "pid": 1, "tid": 1, "ts": 20, "dur": 5},
        {"ph": "X", "name": "ProfilerStep#", "pid": 1, "tid": 1, "ts": 30, "dur": 5},
    ]
    path = tmp_path / "host.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = load_trace(path)
    assert list(trace.step_bounds["step"]) == [4]
    assert trace.hosts == ["host"]


# ---------------------------------------------------------------- the command line


@pytest.mark.parametrize("name", [JAX, TORCH])
def test_analyze_says_host_bound_not_tracing(linked: dict[str, Path], name: str) -> None:
    result = cli("analyze", str(linked[name]), env={"COLUMNS": "120"})
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "Host vs device, per step" in text and "host-bound" in text
    assert "tracing-bound" not in text and "the host traces" not in text
    assert "op time by category" in text
    assert "No Steps line" not in text  # steps came from the capture's own markers
    document = json.loads(cli("analyze", str(linked[name]), "--json").stdout)
    tracing = document["trace"]["tracing"]
    assert {row["bound"] for row in tracing} == {"host"}
    assert all(row["tracing_s"] is None and row["lazy_tensor"] is False for row in tracing)
    timeline = document["timeline"]
    assert all(row["python_tracing_s"] is None and row["graph_build_s"] is None for row in timeline)
    assert all(row["device_busy_s"] > 0 for row in timeline)
    # nothing was written next to the capture
    assert sorted(p.name for p in GPU.iterdir()) == [
        "README.md",
        "capture_gpu.json",
        "capture_gpu.py",
        JAX,
        TORCH,
    ]


def test_analyze_leaves_the_autotuning_out_of_the_top_ops(linked: dict[str, Path]) -> None:
    result = cli("analyze", str(linked[JAX]), env={"COLUMNS": "120"})
    top = result.stdout.split("Top device ops")[1].split("\n\n")[0]
    assert "RedzoneAllocator" not in top and "MemcpyOther" not in top
    assert "Not in the top ops: 2,113 GPU kernels and copies" in result.stdout
    assert "in step 0" in result.stdout
    # the host-vs-device table shows 8 of the 12 annotated steps, and says so
    assert "(4 more steps in --json)" in result.stdout


def test_the_host_table_and_the_device_steps_agree_on_busy(jax_trace: Any) -> None:
    # one interval union, two callers: the tables a user reads side by side agree
    steps = jax_trace.device_steps().set_index("step")["busy_s"]
    table = jax_trace.tracing_vs_device().set_index("step")["device_busy_s"]
    assert np.allclose(steps.sort_index().to_numpy(), table.sort_index().to_numpy())
