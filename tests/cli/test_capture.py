"""`xlaprof capture` against live jobs on the real CPU runtime, from another process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, cli, free_port, start_run, wait_for_steps

from xlaprof.errors import CapturePartial
from xlaprof.inputs.traces import load_trace

pytestmark = pytest.mark.runtime

JOB = """
import time, torch, torch_xla, xlaprof
w = torch.randn(32, 32, device=torch_xla.device())
for i in range(1_000_000):
    with xlaprof.region("user_region"):
        w = (w @ w).tanh()
    torch_xla.sync()
    time.sleep(0.01)
"""


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """Two training jobs serving traces, each under `xlaprof run --server-port`."""
    workdir = tmp_path_factory.mktemp("jobs")
    script = workdir / "job.py"
    script.write_text(JOB)
    started = []
    for index in range(2):
        port = free_port()
        out = workdir / f"run{index}"
        process = start_run(out, [sys.executable, str(script)], "--server-port", str(port))
        started.append((process, port, out))
    for _process, _port, out in started:
        if not wait_for_steps(out, 5):
            pytest.fail("a job never started stepping")
    yield [(port, out) for _p, port, out in started]
    for process, _port, _out in started:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def test_capture_one_host(jobs, tmp_path: Path) -> None:
    port, _run = jobs[0]
    out = tmp_path / "capture"
    result = cli("capture", "--service", f"localhost:{port}", "--duration", "2s", "--out", str(out))
    assert result.returncode == 0, result.stderr
    (path,) = [Path(line) for line in result.stdout.split()]
    assert path.name == f"localhost_{port}.xplane.pb" and path.exists()
    trace = load_trace(out)
    # the host is the one the capture names (XSpace.hostnames), not the address it came from
    assert trace.hosts == [socket.gethostname()]
    events = trace.events
    regions = events[events["name"] == "user_region"]
    # steps ran while it captured (10 ms of sleep each, for 2 s: how many depends on the machine)
    assert len(regions) >= 2
    # every region of a whole step lies in it, one a step (as the job wrote); only the steps
    # the capture cut (its first and last) carry no number
    assert regions["step"].isna().sum() <= 2
    assert regions.groupby("step").size().max() == 1
    markers = events[events["name"] == "StepMarker"]
    assert markers["step"].dropna().is_monotonic_increasing


def test_capture_two_hosts_into_one_logdir(jobs, tmp_path: Path) -> None:
    ports = [port for port, _run in jobs]
    out = tmp_path / "capture"
    services = ",".join(f"localhost:{p}" for p in ports)
    result = cli("capture", "--service", services, "--duration", "2s", "--out", str(out))
    assert result.returncode == 0, result.stderr
    files = sorted(Path(line) for line in result.stdout.split())
    assert [f.name for f in files] == sorted(f"localhost_{p}.xplane.pb" for p in ports)
    assert files[0].parent == files[1].parent  # one session folder
    trace = load_trace(out)  # two files: loaded in worker processes
    assert trace.hosts == sorted(f"localhost:{p}" for p in ports)
    document = json.loads(cli("analyze", "--json", str(out)).stdout)
    assert document["host_skew"] and {r["hosts"] for r in document["host_skew"]} == {2}


def _steps_recorded(run: Path, step: int, timeout: float = 300) -> dict[int, float]:
    """The job's own steps.jsonl once it has a row for ``step``: step -> wall (s) (the
    timeout bounds a job that never writes it: a busy machine gets there later)."""
    deadline = time.monotonic() + timeout
    rows: dict[int, float] = {}
    while time.monotonic() < deadline and step not in rows:
        (steps,) = run.glob("*/steps.jsonl")
        rows = {r["step"]: r["wall_s"] for r in map(json.loads, steps.read_text().splitlines())}
        time.sleep(0.2)
    return rows


def test_a_capture_numbers_steps_as_the_job_does(jobs, tmp_path: Path) -> None:
    # GIVEN a job under xlaprof run that has been stepping for a while
    port, run = jobs[0]
    out = tmp_path / "capture"
    # WHEN it is captured from outside
    result = cli("capture", "--service", f"localhost:{port}", "--duration", "1s", "--out", str(out))
    assert result.returncode == 0, result.stderr
    bounds = load_trace(out).step_bounds
    # THEN the capture's steps are the job's own (not renumbered from 0 in the window), as long
    # as the job recorded them (the median step: one step's end can be late by a preemption of
    # the job between its clock read and the trace's), and only whole steps are numbered
    numbers = bounds["step"].tolist()
    # (how many steps a 1 s capture holds depends on the machine: at least three, for a median)
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))) and len(numbers) >= 3
    assert numbers[0] >= 5  # the fixture waited for five steps before any capture
    recorded = _steps_recorded(run, numbers[-1])
    assert set(numbers) <= set(recorded)
    walls = ((bounds["end_ns"] - bounds["start_ns"]) / 1e9).tolist()
    pairs = zip(numbers, walls, strict=True)
    off = sorted(abs(wall - recorded[n]) / recorded[n] for n, wall in pairs)
    assert off[len(off) // 2] < 0.05


def test_a_dead_host_among_good_ones_keeps_the_good_traces(jobs, tmp_path: Path) -> None:
    # GIVEN two live profiler servers and an address where nothing listens
    dead = free_port()
    live = [port for port, _run in jobs]
    services = ",".join(f"localhost:{p}" for p in [live[0], dead, live[1]])
    out = tmp_path / "capture"
    # WHEN the three are captured
    result = cli("capture", "--service", services, "--duration", "1s", "--out", str(out))
    # THEN the good hosts' traces are kept and listed, the dead one is named in one line, and
    # the exit code says some but not all hosts were captured
    assert result.returncode == CapturePartial.exit_code == 27
    files = sorted(Path(line) for line in result.stdout.split())
    assert [f.name for f in files] == sorted(f"localhost_{p}.xplane.pb" for p in live)
    assert all(f.exists() for f in files)
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert f"localhost:{dead}: no profiler server answers" in line
    assert "captured 2 of 3 hosts" in line
    assert all(f"localhost:{p}:" not in line for p in live)
    trace = load_trace(out)
    assert trace.hosts == sorted(f"localhost:{p}" for p in live)
    # each host's steps are there (how many a 1 s capture holds depends on the machine)
    assert len(trace.step_bounds) >= 2 * 2


def test_a_trace_window_carries_the_jobs_step_numbers(tmp_path: Path) -> None:
    # GIVEN a job run with a trace window over its steps 3 to 5
    script = tmp_path / "job.py"
    script.write_text(JOB)
    out = tmp_path / "run"
    process = start_run(
        out, [sys.executable, str(script)], "--trace-steps", "3:6", "--max-steps", "8"
    )
    assert process.wait(timeout=300) == 0
    (capture,) = out.glob("*/plugins/profile/*/*.xplane.pb")
    # WHEN its capture is copied out of the run and loaded alone (nothing says where the window
    # began but the trace itself)
    alone = tmp_path / "alone" / capture.name
    alone.parent.mkdir()
    alone.write_bytes(capture.read_bytes())
    bounds = load_trace(alone).step_bounds
    # THEN its steps are the job's 3, 4 and 5, as long as the job recorded them
    assert bounds["step"].tolist() == [3, 4, 5]
    (steps,) = out.glob("*/steps.jsonl")
    recorded = {r["step"]: r["wall_s"] for r in map(json.loads, steps.read_text().splitlines())}
    walls = ((bounds["end_ns"] - bounds["start_ns"]) / 1e9).tolist()
    assert sum(walls) == pytest.approx(sum(recorded[n] for n in (3, 4, 5)), rel=0.05)


def test_closed_port_fails_cleanly(tmp_path: Path) -> None:
    port = free_port()  # nothing listens here
    start = time.perf_counter()
    result = cli("capture", "--service", f"localhost:{port}", "--out", str(tmp_path / "c"))
    print(f"closed-port capture failed in {time.perf_counter() - start:.2f} s")
    assert result.returncode == 14
    assert result.stderr.strip().count("\n") == 0 and f"localhost:{port}" in result.stderr
    assert "no profiler server answers" in result.stderr and "Traceback" not in result.stderr
    assert not list((tmp_path / "c").rglob("*.xplane.pb"))


def test_bad_service_is_a_usage_error(tmp_path: Path) -> None:
    result = cli("capture", "--service", "localhost", "--out", str(tmp_path / "c"))
    assert result.returncode == 2 and "HOST:PORT" in result.stderr


def test_an_empty_capture_is_explained_and_leaves_nothing(tmp_path: Path) -> None:
    # GIVEN a job that serves traces but runs no steps
    port = free_port()
    idle = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, torch_xla.debug.profiler as xp\n"
            f"server = xp.start_server({port})\nprint('up', flush=True)\ntime.sleep(600)\n",
        ],
        env={**os.environ, "PJRT_DEVICE": "CPU"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert idle.stdout.readline().strip() == "up"
        # WHEN it is captured THEN the user is told it came back empty and what to try
        out = tmp_path / "c"
        result = cli(
            "capture",
            "--service",
            f"localhost:{port}",
            "--duration",
            "1s",
            "--retries",
            "1",
            "--out",
            str(out),
        )
        assert result.returncode == 15
        line = result.stderr.strip()
        assert "\n" not in line and "came back empty" in line and "after 2 attempt(s)" in line
        assert "warm-up" in line and "--duration" in line
        assert not list(out.rglob("*.xplane.pb"))
    finally:
        idle.kill()
        idle.wait()


def test_capture_without_the_client_is_13(tmp_path: Path) -> None:
    fake = tmp_path / "fake" / "grpc"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no gRPC here')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "fake"), str(REPO)])}
    result = cli("capture", "--service", "localhost:1", "--out", str(tmp_path / "c"), env=env)
    assert result.returncode == 13 and "pip install grpcio" in result.stderr
