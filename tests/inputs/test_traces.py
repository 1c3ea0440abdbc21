"""``load_trace``: every event of a capture, the trace window of a run, sessions, hosts, and
captures that cannot be read (one line naming the file, or a fuzzed capture that never crashes
the loader).

Expected counts come from the input: the independent decode recorded beside each capture in
``../shared/traces`` (its ``.source.txt``), this suite's own decode of the H100 captures
(``decode.py``), the steps a sample run traced (``--trace-steps 4:6``).
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from builders import write_pod_host
from decode import Decoded, raw_event_count
from fuzzing import (
    MUTATIONS,
    Outcomes,
    chrome_sources,
    deep_json,
    load_trace_steps,
    mutate_bytes,
    mutate_chrome_trace,
    mutate_gzip,
    mutate_xspace,
    save_repro,
    xplane_sources,
)
from helpers import DATA, MI300, SHARED_CAPTURES, cli, sample_capture, sample_run, shared_trace

from xlaprof.errors import BadCapture, InputNotRecognized, XlaprofError
from xlaprof.inputs.traces import load_trace
from xlaprof.parse.xplane.schema import xspace_class
from xlaprof.tables.device import summarize_host

RUN = "recompile_varying_batch"


@pytest.mark.parametrize("name", SHARED_CAPTURES)
def test_every_capture_loads_with_its_raw_event_count(traces: dict[str, Any], name: str) -> None:
    assert len(traces[name].events) == raw_event_count(name)


def test_jax_capture_loads_every_event_of_the_independent_decode(
    jax_trace: Any, jax_xspace: Decoded, gpu_facts: dict[str, Any]
) -> None:
    events = jax_trace.events
    assert len(events) == len(jax_xspace.events) == 64_323
    # the GPU plane names its device (gpu_device_name), as the script's record does
    assert list(jax_trace.devices["type"]) == [gpu_facts["jax"]["device_kind"]]
    for plane in ("/device:GPU:0", "/host:CPU"):
        assert (events["plane"] == plane).sum() == len(jax_xspace.on(plane))


def test_kineto_capture_loads_every_timed_event(
    torch_trace: Any, kineto_events: list[dict[str, Any]]
) -> None:
    timed = [e for e in kineto_events if e.get("ph") in ("X", "B", "E")]
    assert len(torch_trace.events) == len(timed) == 1520


def test_sample_run_trace_steps_come_from_the_window() -> None:
    trace = load_trace(sample_run(RUN))  # --trace-steps 4:6 was used
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


def test_the_device_model_is_made_when_first_asked_for_and_once() -> None:
    # GIVEN a real capture loaded, its events read
    trace = load_trace(sample_capture(RUN))
    assert len(trace.events)
    # THEN its device model is not made yet (reading events alone does not pay for it) ...
    assert trace.summarize is not None
    # ... and when asked for, it is the device model of those events, made once and kept
    made = trace.device_summary
    assert made is not None and trace.summarize is None and trace.device_summary is made
    assert made.events == len(trace.events)
    # (its steps, ops and host-vs-device tables as the model makes them from the events)
    direct = summarize_host(trace.events, trace.devices, trace.step_bounds)
    for table in ("steps", "ops", "tracing"):
        pd.testing.assert_frame_equal(getattr(made, table), getattr(direct, table))


def test_three_sessions_stay_three(tmp_path: Path) -> None:
    profile = tmp_path / "plugins" / "profile"
    for session in ("2026_01_01_10_00_00", "2026_01_01_11_00_00", "2026_01_01_12_00_00"):
        (profile / session).mkdir(parents=True)
        (profile / session / "host.xplane.pb").symlink_to(shared_trace(MI300))
    trace = load_trace(tmp_path)
    assert trace.sessions == [
        "2026_01_01_10_00_00",
        "2026_01_01_11_00_00",
        "2026_01_01_12_00_00",
    ]
    assert trace.session == "2026_01_01_12_00_00"  # the latest by default
    assert len(trace.events) == raw_event_count(MI300)  # one session, not three overlaid
    first = load_trace(tmp_path, session="2026_01_01_10_00_00")
    assert set(first.events["session"]) == {"2026_01_01_10_00_00"}
    chosen = cli("analyze", str(tmp_path), "--session", "2026_01_01_11_00_00", "--json")
    assert chosen.returncode == 0, chosen.stderr
    document = json.loads(chosen.stdout)["trace"]
    assert document["session"] == "2026_01_01_11_00_00" and len(document["sessions"]) == 3
    assert "3 sessions" in chosen.stderr and "analyzing 2026_01_01_11_00_00" in chosen.stderr
    missing = cli("analyze", str(tmp_path), "--session", "nope")
    assert missing.returncode == 7 and "nope" in missing.stderr


def test_a_corrupt_host_among_good_ones_is_named_and_the_rest_analyzed(tmp_path: Path) -> None:
    session = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    good = shared_trace(MI300).read_bytes()
    (session / "gpu-0.xplane.pb").write_bytes(good)
    (session / "gpu-1.xplane.pb").write_bytes(good[: len(good) // 2])  # truncated
    trace = load_trace(tmp_path)
    assert len(trace.warnings) == 1 and "gpu-1.xplane.pb" in trace.warnings[0]
    assert "truncated" in trace.warnings[0]
    assert len(trace.events) == raw_event_count(MI300)
    assert trace.hosts == ["tw003"]  # XSpace.hostnames of the good file
    result = cli("analyze", str(tmp_path))
    assert result.returncode == 0
    assert "gpu-1.xplane.pb" in result.stderr and "Traceback" not in result.stderr
    assert "GPU:7" in result.stdout  # the good host's devices are analyzed


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (lambda good: good[:1000], "truncated"),
        (lambda good: b"\x07" + good[1:], "corrupt"),
        (lambda good: b"", "empty"),
        (lambda good: b"this is a text file, not a capture\n" * 5, "corrupt"),
    ],
)
def test_a_bad_capture_is_one_line_naming_the_file(tmp_path: Path, content, why: str) -> None:
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(content(shared_trace(MI300).read_bytes()))
    with pytest.raises(BadCapture, match=why):
        load_trace(path)
    result = cli("analyze", str(path))
    assert result.returncode == BadCapture.exit_code
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and why in lines[0]


def test_no_trace_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputNotRecognized, match="no trace here"):
        load_trace(tmp_path)
    result = cli("view", str(tmp_path))
    assert result.returncode == 7 and "no trace to view" in result.stderr


def test_a_sparse_5gb_xplane_is_refused_before_reading(tmp_path: Path) -> None:
    from xlaprof.errors import InputTooLarge

    # GIVEN a 5 GB sparse .xplane.pb (no disk used), alone and beside a real capture
    session = tmp_path / "logdir" / "plugins" / "profile" / "1"
    session.mkdir(parents=True)
    sparse = session / "huge.xplane.pb"
    with sparse.open("wb") as handle:
        handle.truncate(5 * 1024**3)
    write_pod_host(session / "good.xplane.pb")
    # WHEN it is analyzed alone (with and without --max-size), and in the logdir
    alone = cli("analyze", str(sparse))
    capped = cli("analyze", str(sparse), "--max-size", "1GB")
    both = cli("analyze", str(tmp_path / "logdir"), "--json")
    # THEN alone it is refused with exit 8 and a hint, never a MemoryError; beside a good host
    # it is that host's warning
    for out in (alone, capped):
        assert out.returncode == InputTooLarge.exit_code, out.stderr
        assert "--max-size" in out.stderr and "MemoryError" not in out.stderr
    assert both.returncode == 0, both.stderr
    warnings = json.loads(both.stdout)["trace"]["warnings"]
    assert any("huge.xplane.pb" in w and "larger than" in w for w in warnings), warnings


def test_xplane_loader_never_crashes(tmp_path: Path) -> None:

    sources = xplane_sources()
    assert len(sources) >= 3
    space_class = xspace_class()
    originals = [(p.name, p.read_bytes()) for p in sources]
    outcomes = Outcomes("xplane")
    for seed in range(MUTATIONS):
        rng = random.Random(seed)
        name, data = rng.choice(originals)
        if space_class is not None and rng.random() < 0.75:
            space = space_class()
            space.ParseFromString(data)
            mutate_xspace(rng, space)
            mutated = space.SerializeToString()
        else:
            mutated = mutate_bytes(rng, data)
        folder = tmp_path / str(seed) / "plugins" / "profile" / "1"
        folder.mkdir(parents=True)
        path = folder / "host.xplane.pb"
        path.write_bytes(mutated)
        before = outcomes.crash_count
        outcomes.call(seed, functools.partial(load_trace_steps, path), name)
        if outcomes.crash_count > before:
            save_repro("xplane", seed, name, mutated)
        shutil.rmtree(tmp_path / str(seed))
    outcomes.check()


def test_chrome_trace_loader_never_crashes(tmp_path: Path) -> None:

    sources = chrome_sources()
    assert len(sources) >= 3
    originals = [(p.name, p.read_bytes()) for p in sources]
    outcomes = Outcomes("chrome")
    for seed in range(MUTATIONS):
        rng = random.Random(seed)
        name, data = rng.choice(originals)
        mutated = mutate_gzip(rng, data, functools.partial(mutate_chrome_trace, rng))
        if rng.random() < 0.02:  # nested past any recursion limit (issue 31)
            mutated = gzip.compress(b'{"traceEvents": ' + deep_json(rng) + b"}", 1)
        path = tmp_path / f"{seed}.trace.json.gz"
        path.write_bytes(mutated)
        before = outcomes.crash_count
        outcomes.call(seed, functools.partial(load_trace_steps, path), name)
        if outcomes.crash_count > before:
            save_repro("chrome", seed, name, mutated)
        path.unlink()
    outcomes.check()


REPRO = DATA / "fuzz_repro"


_REPROS = sorted(p.name for p in REPRO.iterdir() if p.name != "README.md")


@pytest.mark.parametrize("name", _REPROS)
def test_trace_reproducers(name: str) -> None:
    """Each minimal input of a crash the trace fuzzing found loads or raises XlaprofError."""
    from xlaprof.inputs.traces import load_trace

    with contextlib.suppress(XlaprofError):
        load_trace(REPRO / name).step_times()


def test_a_trace_window_file_loaded_alone_keeps_the_runs_step_numbers() -> None:
    # GIVEN the trace window's capture file of a run, named alone (or its logdir in the run)
    capture = sample_capture(RUN)
    for path in (capture, capture.parent.parent.parent):
        # WHEN it is loaded THEN its steps are the run's (--trace-steps 4:6), not 0 and 1
        markers = load_trace(path).events.query("name == 'StepMarker'")
        assert list(markers["step"]) == [4, 5], path
