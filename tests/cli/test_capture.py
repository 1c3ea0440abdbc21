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
    # every region lies in a step, and each step has exactly one region (as the job wrote)
    assert regions["step"].notna().all()
    assert regions.groupby("step").size().max() == 1
    markers = events[events["name"] == "StepMarker"]
    assert markers["step"].is_monotonic_increasing


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
    fake = tmp_path / "fake" / "xprof"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no XProf here')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "fake"), str(REPO)])}
    result = cli("capture", "--service", "localhost:1", "--out", str(tmp_path / "c"), env=env)
    assert result.returncode == 13 and "pip install xprof" in result.stderr
