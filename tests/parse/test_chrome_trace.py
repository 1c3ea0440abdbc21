"""Chrome traces (Kineto, the PyTorch profiler): ``xlaprof.parse.chrome_trace``.

Expected values come from the JSON itself, read here with ``gzip`` + ``json``, or from the
events written into a trace built here.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from builders import hostile_chrome_trace
from helpers import HTA, MI210, cli, sample_run, shared_trace

from xlaprof.errors import BadCapture
from xlaprof.inputs.traces import load_trace
from xlaprof.parse.chrome_trace import chrome_trace_frame

RUN = "recompile_varying_batch"


def test_chrome_trace_agrees_with_xplane() -> None:
    (json_file,) = sample_run(RUN).glob("*/plugins/profile/*/*.trace.json.gz")
    chrome = chrome_trace_frame(json_file)
    xplane = load_trace(sample_run(RUN)).events
    for name in ("StepMarker", "XLAGraphExecutor::Compile"):
        assert (chrome["name"] == name).sum() == (xplane["name"] == name).sum()


def test_a_truncated_chrome_trace_is_one_line_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "host.trace.json.gz"
    path.write_bytes(shared_trace(MI210).read_bytes()[:5000])
    result = cli("analyze", str(path))
    assert result.returncode == BadCapture.exit_code
    assert str(path) in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_kineto_epoch_timestamps_do_not_overflow(traces: dict[str, Any]) -> None:
    events = traces[HTA].events
    with gzip.open(shared_trace(HTA), "rt") as handle:
        raw = [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]
    first = min(raw, key=lambda e: e["ts"])
    assert first["ts"] > 10**15  # microseconds since the epoch
    assert int(events["start_ns"].min()) == int(first["ts"]) * 1000
    longest = max(raw, key=lambda e: e["dur"])
    assert events["duration_ns"].max() == longest["dur"] * 1000


def test_cupti_range_profiler_ranges_are_no_device_time(traces: dict[str, Any]) -> None:
    # GIVEN the CUPTI range profiler's capture: its GPU events are ``cuda_profiler_range``
    # ranges, whose times Kineto makes up by splitting the profiled span evenly among them
    with gzip.open(shared_trace(HTA), "rt") as handle:
        raw = [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]
    ranges = [e for e in raw if e.get("cat") == "cuda_profiler_range"]
    timed_gpu = [e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert ranges and not timed_gpu
    span = max(e["ts"] + e["dur"] for e in ranges) - min(e["ts"] for e in ranges)
    assert {e["dur"] for e in ranges} == {span // len(ranges)}  # tiled, not measured
    # THEN no device is busy, idle or bound in it: it has no timed device event
    trace = traces[HTA]
    assert trace.device_utilization().empty
    assert trace.device_ops().empty
    # and the ranges are kept (with their counters), on no device's plane
    events = trace.events
    assert not (events["plane_kind"] == "device").any()
    assert (events["name"].astype(str).isin({e["name"] for e in ranges})).sum() >= len(ranges)


def test_kineto_gpu_kernels_sit_on_their_streams(traces: dict[str, Any]) -> None:
    with gzip.open(shared_trace(MI210), "rt") as handle:
        raw = [e for e in json.load(handle)["traceEvents"] if e.get("cat") == "kernel"]
    events = traces[MI210].events
    kernels = events[events["plane"] == "/device:GPU:1"]
    assert len(kernels) == len(raw) and set(kernels["line"]) == {"stream 0"}
    # busy = the union of the kernels' intervals, computed here from the raw JSON
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in raw)
    busy, reach = 0.0, None
    for start, end in spans:
        if reach is None or start > reach:
            busy += end - start
            reach = end
        elif end > reach:
            busy += end - reach
            reach = end
    utilization = traces[MI210].device_utilization().iloc[0]
    assert utilization["device"] == "GPU:1"
    assert utilization["busy_s"] == pytest.approx(busy / 1e6, rel=1e-4)  # ns resolution
    assert utilization["span_s"] == pytest.approx((spans[-1][1] - spans[0][0]) / 1e6, rel=1e-6)


def test_chrome_begin_end_pairs_are_events(tmp_path: Path) -> None:
    base = 1_700_000_000_000_000  # epoch microseconds
    document = {
        "traceEvents": [
            {"ph": "M", "name": "process_labels", "pid": 3, "args": {"labels": "GPU 3"}},
            {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": base},
            {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": base + 2.5},
            {"ph": "E", "pid": 1, "tid": 1, "ts": base + 4},
            {"ph": "E", "pid": 1, "tid": 1, "ts": base + 10},
            {"ph": "X", "name": "k", "cat": "kernel", "pid": 3, "tid": 7, "ts": base + 1, "dur": 3},
            {"ph": "E", "pid": 2, "tid": 1, "ts": base + 11},  # its begin is before the capture
        ]
    }
    path = tmp_path / "host.pt.trace.json"
    path.write_text(json.dumps(document))
    frame = chrome_trace_frame(path).set_index("name")
    assert frame.loc["outer", "duration_ns"] == 10_000
    assert frame.loc["inner", "duration_ns"] == 1_500
    assert frame.loc["inner", "start_ns"] == base * 1000 + 2_500
    assert frame.loc["k", "plane"] == "/device:GPU:3" and frame.loc["k", "line"] == "stream 7"
    assert len(frame) == 3


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


def _deep_chrome_trace(path: Path) -> None:
    path.write_text('{"traceEvents": ' + "[" * 200_000 + "]" * 200_000 + "}")


def test_a_deeply_nested_chrome_trace_is_one_hosts_warning(tmp_path: Path) -> None:
    from xlaprof.errors import BadCapture

    # GIVEN a logdir of two hosts, one of them a Chrome trace nested 200k deep
    session = tmp_path / "logdir" / "plugins" / "profile" / "1"
    session.mkdir(parents=True)
    hostile_chrome_trace(session / "good.trace.json")
    _deep_chrome_trace(session / "deep.trace.json")
    # WHEN the logdir, and the deep file alone, are analyzed
    both = cli("analyze", str(tmp_path / "logdir"), "--json")
    alone = cli("analyze", str(session / "deep.trace.json"))
    # THEN the good host is analyzed with a warning naming the other; alone, it is exit 23
    assert both.returncode == 0, both.stderr
    document = json.loads(both.stdout)
    assert document["trace"]["hosts"] == ["good"]
    assert any(
        "deep.trace.json" in w and "nested too deeply" in w for w in document["trace"]["warnings"]
    )
    assert alone.returncode == BadCapture.exit_code, alone.stderr
    assert "nested too deeply" in alone.stderr and "Traceback" not in alone.stderr


def test_a_gzip_bomb_of_events_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    import zlib

    from xlaprof.errors import InputTooLarge

    # GIVEN a Chrome trace of ~100 MB of events that gzips to well under 1 MB
    event = b'{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 1, "dur": 1},'
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [compressor.compress(b'{"traceEvents": [')]
    block = event * 16384
    for _ in range(100 * 1024**2 // len(block)):
        parts.append(compressor.compress(block))
    parts.append(compressor.compress(event[:-1] + b"]}") + compressor.flush())
    bomb = tmp_path / "bomb.trace.json.gz"
    bomb.write_bytes(b"".join(parts))
    # WHEN it is analyzed
    out = cli("analyze", str(bomb))
    # THEN it is refused before it is parsed: exit 8, saying how to read it anyway
    assert out.returncode == InputTooLarge.exit_code, out.stderr
    assert "inflates to more than" in out.stderr and "--max-size" in out.stderr


def test_kineto_devices_are_found_from_categories_when_metadata_is_absent(tmp_path: Path) -> None:
    """No public Kineto trace without process metadata was found, so this one is made from a
    real one: the MI210 PyTorch-profiler trace (/work/shared/traces) with every ``ph: M``
    metadata event stripped, which leaves the 562 ``kernel`` events on pid 1 (``args.device``
    1) and the host's ``cuda_runtime`` events with nothing naming their processes, as in a
    trace written without ``process_name``/``process_labels`` events."""
    # GIVEN the real trace without its metadata events
    document = json.loads(gzip.decompress(shared_trace(MI210).read_bytes()))
    document["traceEvents"] = [e for e in document["traceEvents"] if e.get("ph") != "M"]
    path = tmp_path / "mi210_no_metadata.pt.trace.json"
    path.write_text(json.dumps(document))
    # AND what is true of it, read from the JSON itself
    kernels = [e for e in document["traceEvents"] if e.get("cat") == "kernel"]
    devices = {f"GPU:{e['args']['device']}" for e in kernels}
    # WHEN it is loaded
    trace = load_trace(path)
    # THEN the GPU the kernels ran on is a device, with all of its kernels, and the host's
    # runtime calls stay on the host
    assert set(trace.devices["device"]) == devices == {"GPU:1"}
    on_device = trace.events[trace.events["plane_kind"] == "device"]
    assert len(on_device) == len(kernels)
    host = trace.events[trace.events["plane_kind"] == "host"]
    assert (
        (host["name"] == "hipLaunchKernel").sum()
        == sum(1 for e in document["traceEvents"] if e.get("name") == "hipLaunchKernel")
        > 0
    )
    # AND its busy time is the kernels' (the report read "0 device(s) ... No device events")
    assert trace.device_utilization().iloc[0]["busy_s"] > 0
