"""Steps and host tables of captures without device planes (``xlaprof.tables.host_steps``).

Inputs are real: TorchTPU's own captures made without a TPU (``../shared/traces/torchtpu``, its
README says how and how many events each holds) and a PyTorch-profiler capture with the
TORCH_TRACE log of the same run (sample_traces/host_capture/README.md). Expected values come
from an independent decode (``tests/decode.py``: a protobuf wire walk, gzip + json), never from
xlaprof's output.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from decode import clipped_union_ns, decode_kineto, decode_xspace
from helpers import SAMPLES, TRACES, analyzed_inputs

from xlaprof.findings import Kind
from xlaprof.model.result import PartResult
from xlaprof.pipeline import analyze_one

TPU = TRACES / "torchtpu"
HOST = SAMPLES / "host_capture"
# the README's event counts, per capture
EVENTS = {
    "profile_direct.xplane.pb": 850,
    "live_capture_step_n.xplane.pb": 1400,
    "live_capture_profilerstep.xplane.pb": 966,
    "torch_profiler_tpuconfig.pt.trace.json": 144,
}
_MS = 1e6


def _path(name: str) -> Path:
    path = TPU / name
    assert path.is_file(), f"{path}: a TorchTPU capture (../shared/traces/torchtpu/README.md)"
    return path


@pytest.fixture(scope="module")
def results() -> dict[str, PartResult]:
    out = {name: analyze_one(_path(name))[0] for name in EVENTS}
    out["host_capture"] = analyze_one(HOST)[0]
    return out


def _xplane_ranges(name: str, pattern: str) -> list[tuple[float, float, str]]:
    decoded = decode_xspace(_path(name))
    found = [
        (e.start_ns, e.end_ns, e.name) for e in decoded.events if re.fullmatch(pattern, e.name)
    ]
    return sorted(found)


def _kineto(path: Path) -> list[dict]:
    if path.name.endswith(".gz"):
        return decode_kineto(path)
    return json.loads(path.read_text())["traceEvents"]


@pytest.mark.parametrize("name", list(EVENTS))
def test_every_torchtpu_capture_has_its_events_and_no_device(results, name: str) -> None:
    result = results[name]
    assert result.part.traced and analyzed_inputs(_path(name)).trace.event_count == EVENTS[name]
    assert result.host_activity is not None and not result.host_activity.device_planes


def test_step_n_ranges_on_an_xplane_host_line_are_the_steps(results) -> None:
    # GIVEN TorchTPU's live capture of record_function("step_{i}") ranges
    ranges = _xplane_ranges("live_capture_step_n.xplane.pb", r"step_\d+")
    steps = results["live_capture_step_n.xplane.pb"].host_activity.steps
    # THEN one step per range, numbered as named, as long as the range
    assert steps["step"].tolist() == [int(n.split("_")[1]) for _, _, n in ranges]
    walls = [(b - a) / _MS for a, b, _ in ranges]
    assert steps["wall_ms"].tolist() == pytest.approx(walls, abs=1e-3)


def test_aten_time_per_step_is_the_union_of_its_aten_ops(results) -> None:
    # GIVEN the same capture, decoded independently
    decoded = decode_xspace(_path("live_capture_step_n.xplane.pb"))
    aten = [(int(e.start_ns), int(e.end_ns)) for e in decoded.events if e.name.startswith("aten::")]
    ranges = _xplane_ranges("live_capture_step_n.xplane.pb", r"step_\d+")
    steps = results["live_capture_step_n.xplane.pb"].host_activity.steps
    # THEN each step's aten time is the union of aten ops inside it; nothing else is measured
    expected = [clipped_union_ns(aten, int(a), int(b)) / _MS for a, b, _ in ranges]
    assert steps["aten_ms"].tolist() == pytest.approx(expected, abs=1e-3)
    assert steps["python_ms"].isna().all() and steps["compile_ms"].isna().all()
    parts = steps[["aten_ms", "unrecorded_ms"]].sum(axis=1)
    assert parts.tolist() == pytest.approx(steps["wall_ms"].tolist(), abs=1e-6)
    # the hottest aten op of each step is one of its ops
    hot = results["live_capture_step_n.xplane.pb"].host_activity.hot
    assert set(hot["name"]) <= {e.name for e in decoded.events if e.name.startswith("aten::")}


def test_profilerstep_ranges_in_an_xplane_are_counted_in_order(results) -> None:
    # the XSpace keeps "ProfilerStep" without its number: one step per range, in order
    ranges = _xplane_ranges("live_capture_profilerstep.xplane.pb", r"ProfilerStep")
    result = results["live_capture_profilerstep.xplane.pb"]
    steps = result.host_activity.steps
    assert len(steps) == len(ranges) == 69
    assert steps["step"].tolist() == list(range(69))
    assert "capture order" in result.host_activity.source
    assert len(result.timeline) == 69  # the step model reads the same steps


def test_python_tracer_record_function_ranges_are_steps(results) -> None:
    # GIVEN a capture with Python-tracer events only: record_function names are not recorded,
    # but each range starts with one _record_function_enter_new call
    decoded = decode_xspace(_path("profile_direct.xplane.pb"))
    opened = [e for e in decoded.events if e.name.endswith("_record_function_enter_new")]
    steps = results["profile_direct.xplane.pb"].host_activity.steps
    assert len(steps) == len(opened) == 20
    # each step starts at the __enter__ that opened its range
    enters = sorted(
        e.start_ns for e in decoded.events if re.fullmatch(r"\$profiler\.py:\d+ __enter__", e.name)
    )
    assert len(enters) == 20
    first = steps["start_ns"].iloc[0]
    assert (steps["start_ns"] - first).tolist() == pytest.approx(
        [(s - enters[0]) for s in enters], abs=2
    )
    assert steps["aten_ms"].isna().all()  # no aten events: not measured, not zero


def test_kineto_user_step_ranges_are_steps(results) -> None:
    events = _kineto(_path("torch_profiler_tpuconfig.pt.trace.json"))
    named = sorted(
        (e["ts"], e["dur"], e["name"])
        for e in events
        if e.get("ph") == "X" and re.fullmatch(r"user_step_\d+", str(e.get("name")))
    )
    steps = results["torch_profiler_tpuconfig.pt.trace.json"].host_activity.steps
    assert steps["step"].tolist() == [int(n.rsplit("_", 1)[1]) for _, _, n in named]
    assert steps["wall_ms"].tolist() == pytest.approx([d / 1e3 for _, d, _ in named], abs=1e-3)


def _profiler_steps(events: list[dict]) -> dict[int, tuple[float, float]]:
    """Each ``ProfilerStep#N`` range of a Kineto trace: N -> (start, end) in microseconds."""
    return {
        int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("ph") == "X" and str(e.get("name")).startswith("ProfilerStep#")
    }


def _recompile_step(steps_in_trace: dict[int, tuple[float, float]]) -> int:
    """The step of the host capture in which its TORCH_TRACE log's recompile (0/1) started, by
    the log's own clock and the trace's ``baseTimeNanoseconds``."""
    log = gzip.decompress(
        (HOST / "torch_trace" / "dedicated_log_torch_trace_host_capture.log.gz").read_bytes()
    ).decode()
    (start,) = [
        m["start_time"]
        for line in log.splitlines()
        if '"compilation_metrics"' in line
        for m in [json.loads(line[line.index("{") :])["compilation_metrics"]]
        if m["compile_id"] == "0/1"
    ]
    base = json.loads(gzip.decompress((HOST / "torch_profiler_cpu.pt.trace.json.gz").read_bytes()))[
        "baseTimeNanoseconds"
    ]
    at = (start * 1e9 - base) / 1000  # trace microseconds
    (step,) = [s for s, (a, b) in steps_in_trace.items() if a <= at <= b]
    return step


def test_a_read_that_stalls_each_step_and_a_compile_in_a_steady_step(results) -> None:
    # GIVEN a CPU-only capture of a loop whose DataLoader sleeps each batch and whose batch
    # shrinks at step 8 (a recompile), with the TORCH_TRACE log of the same run
    events = _kineto(HOST / "torch_profiler_cpu.pt.trace.json.gz")
    steps_in_trace = _profiler_steps(events)
    reads = [
        (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000))
        for e in events
        if e.get("ph") == "X" and "DataLoader" in str(e.get("name"))
    ]
    result = results["host_capture"]
    steps = result.host_activity.steps.set_index("step")
    assert sorted(steps.index) == sorted(steps_in_trace) == list(range(12))
    # THEN each step's read time is the DataLoader's time in it (no compile overlaps it there)
    for step, (a, b) in steps_in_trace.items():
        if step in (0, 8):
            continue
        expected = clipped_union_ns(reads, round(a * 1000), round(b * 1000)) / _MS
        assert steps.loc[step, "read_ms"] == pytest.approx(expected, abs=1e-3)
    kinds = {f.kind: f for f in result.findings}
    assert kinds[Kind.INPUT_BOUND].evidence["steps_reading"] == 9
    # and the compile: in step 8 of the capture, and placed there from the log's own clock
    expected_step = _recompile_step(steps_in_trace)
    assert expected_step == 8
    compiles = result.torch_compiles.set_index("compile_id")
    assert compiles.loc["0/1", "step"] == expected_step
    in_step = kinds[Kind.COMPILE_IN_STEP]
    # (evidence as its JSON says it: step numbers as keys are strings)
    assert list(in_step.evidence["compiling_steps_ms"]) == [str(expected_step)]
    assert in_step.evidence["torch_compiles"][0].startswith("0/1 ")
    recompile = kinds[Kind.RECOMPILATION]
    assert recompile.evidence["recompile_steps"] == [expected_step]


def test_a_step_the_log_says_compiled_is_steady_in_no_table(results) -> None:
    # GIVEN the CPU-only capture whose batch shrinks at step 8, and the step the TORCH_TRACE
    # log's own clock puts that recompile (0/1) in
    steps_in_trace = _profiler_steps(_kineto(HOST / "torch_profiler_cpu.pt.trace.json.gz"))
    recompiled = _recompile_step(steps_in_trace)
    # WHEN it is analyzed (the timeline has no lazy-tensor or PJRT compile spans; the host table
    # measures dynamo's)
    result = results["host_capture"]
    warmup = result.counts.warmup_steps
    expected = [s for s in sorted(steps_in_trace) if s >= warmup and s != recompiled]
    # THEN that step is steady nowhere: not in the story, the timeline, the host table's median
    # or the analyzers' count, and the timeline's compile is the host table's
    timeline = result.timeline.set_index("step")
    assert [int(s) for s in timeline.index[timeline["steady"].astype(bool)]] == expected
    assert result.story.steady_steps == len(expected)
    assert result.story.later_compile_steps == [recompiled]
    assert result.host_view.steady_steps == expected
    kinds = {f.kind: f for f in result.findings}
    assert kinds[Kind.INPUT_BOUND].evidence["steady_steps"] == len(expected)
    host = result.host_activity.steps.set_index("step")
    for step in steps_in_trace:
        assert timeline.loc[step, "compile_s"] == pytest.approx(host.loc[step, "compile_ms"] / 1e3)
    assert timeline.loc[recompiled, "compile_s"] > 1.0  # (49.6 s: a busy machine's compile)


def test_an_xspace_capture_places_its_runs_compiles_in_the_steps_it_shows() -> None:
    # GIVEN torch_xla's CPU capture (lines timed from the session start) and the TORCH_TRACE
    # log of the same run, whose batch shrinks at step 5 (sample_traces/xla_compile_capture)
    folder = SAMPLES / "xla_compile_capture"
    (xplane,) = folder.glob("plugins/profile/*/*.xplane.pb")
    decoded = decode_xspace(xplane)
    steps = sorted((e.start_ns, e.end_ns) for e in decoded.events if e.name == "train_step")
    compiles = [e.start_ns for e in decoded.events if e.name == "XLAGraphExecutor::Compile"]
    # the steps after warm-up in which the capture itself shows XLA compiling
    compiling = sorted({i for i, (a, b) in enumerate(steps) for c in compiles if a <= c <= b})
    late = [s for s in compiling if s >= 2]
    assert late == [5]
    # WHEN both are analyzed together THEN the recompile is placed in that step
    result = analyze_one(folder)[0]
    table = result.torch_compiles.set_index("compile_id")
    assert table.loc["0/1", "step"] == late[0]
    (finding,) = [f for f in result.findings if f.kind is Kind.RECOMPILATION]
    assert finding.evidence["recompile_steps"] == late


def test_python_bound_steps_without_a_device(tmp_path: Path) -> None:
    # GIVEN a CPU-only capture with Python-function events whose steps run a list
    # comprehension over 300,000 numbers (sample_traces/host_python)
    folder = SAMPLES / "host_python"
    events = _kineto(next(folder.glob("*.pt.trace.json.gz")))
    complete = [e for e in events if e.get("ph") == "X"]

    def spans(kind: str) -> list[tuple[int, int]]:
        return [
            (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000))
            for e in complete
            if e.get("cat") == kind
        ]

    python, aten = spans("python_function"), spans("cpu_op")
    steps = {
        int(e["name"].split("#")[1]): (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000))
        for e in complete
        if str(e.get("name")).startswith("ProfilerStep#")
    }
    # Python time per step: what Python frames cover and no aten op does (independently)
    expected = {
        n: (clipped_union_ns(python + aten, a, b) - clipped_union_ns(aten, a, b)) / _MS
        for n, (a, b) in steps.items()
    }
    result = analyze_one(folder, source_root=folder)[0]
    table = result.host_activity.steps.set_index("step")
    for step, ms in expected.items():
        assert table.loc[step, "python_ms"] == pytest.approx(ms, abs=1e-3)
    # THEN the finding: Python's share of the steady steps, at the user's comprehension
    (finding,) = [f for f in result.findings if f.kind is Kind.HOST_BOUND]
    steady = [n for n in steps if n >= 2]
    share = sum(expected[n] for n in steady) / sum(
        (steps[n][1] - steps[n][0]) / _MS for n in steady
    )
    assert finding.evidence["python_share"] == pytest.approx(share, abs=1e-3)
    assert share >= 0.5
    assert str(finding.location) == "make_capture.py:19"
