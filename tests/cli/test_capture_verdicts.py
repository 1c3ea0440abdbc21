"""A live capture (``xlaprof capture`` of a job serving traces, no ``xlaprof run``) of a
device-bound job and of a tracing-bound job: each gets its own, right verdict (issue 45).

A device-bound job in steady state keeps torch_xla's CPU client's queue of executions full, so
each sync blocks in its ``TensorCollectionBarrier`` until a slot frees: that wait is no host
work. A tracing-bound job traces hundreds of tiny ops a step and its device idles. Each job
first measures itself (the truth the verdicts are held to): its stepping thread's CPU time per
step and, with the queue drained, its device's cadence (the device-bound job) or its median
``ExecuteTime`` (the tracing-bound job: launch to completion with nothing queued ahead).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from builders import DEVICE_BOUND_MATMULS, DEVICE_BOUND_STEP
from helpers import cli, free_port

from xlaprof.pipeline import analyze_one

pytestmark = pytest.mark.runtime

_MEASURE = """
import json, statistics, sys, time
import torch, torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.debug.profiler as xp

def measured(step, count):
    xm.wait_device_ops()
    cpu, start = time.thread_time(), time.perf_counter()
    for _ in range(count):
        step()
    cpu = (time.thread_time() - cpu) / count
    xm.wait_device_ops()
    cadence = (time.perf_counter() - start) / count
    executions = [value / 1e9 for _, value in met.metric_data("ExecuteTime")[2][-count:]]
    return {"host_cpu_s": cpu, "cadence_s": cadence,
            "execute_s": statistics.median(executions)}
"""

DEVICE_BOUND = (
    _MEASURE
    + DEVICE_BOUND_STEP
    + f"""
for _ in range(3):
    step()
print("TRUTH " + json.dumps(measured(step, 4)), flush=True)
server = xp.start_server(int(sys.argv[1]))
for i in range(10**9):
    with xp.StepTrace("train", step_num=i):
        for _ in range({DEVICE_BOUND_MATMULS}):
            x = torch.tanh(x @ w)
    if i == 40:  # the queue of executions is full: the steady state
        print("STEADY", flush=True)
"""
)

TRACING_BOUND = (
    _MEASURE
    + """
device = torch_xla.device()
state = torch.zeros(64, device=device)
weights = [torch.randn(64, device=device) for _ in range(16)]
def trace():
    global state
    for _ in range(25):
        for w in weights:
            state = state * 0.999 + w * 0.001
def step():
    trace()
    torch_xla.sync()
for _ in range(3):
    step()
print("TRUTH " + json.dumps(measured(step, 10)), flush=True)
server = xp.start_server(int(sys.argv[1]))
for i in range(10**9):
    with xp.StepTrace("train", step_num=i):
        trace()
    if i == 10:
        print("STEADY", flush=True)
"""
)


def _wait_for(process: subprocess.Popen[str], marker: str, timeout: float = 300) -> str:
    """The job's stdout up to the line starting with ``marker``."""
    assert process.stdout is not None
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith(marker):
            return "".join(seen)
    pytest.fail(f"the job never printed {marker}: {''.join(seen)[-2000:]}")


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """Each job's own measurements and the analysis of a 2 s live capture of it in steady
    state; both jobs start together (each waits for the runtime's start-up on its own), and
    each stops once captured, so the other's capture has the cores to itself."""
    workdir = tmp_path_factory.mktemp("verdicts")
    jobs = {}
    for name, source in (("device", DEVICE_BOUND), ("tracing", TRACING_BOUND)):
        script = workdir / f"{name}.py"
        script.write_text(source)
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, str(script), str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**__import__("os").environ, "PJRT_DEVICE": "CPU"},
        )
        jobs[name] = (process, port)
    out = {}
    try:
        for name, (process, port) in jobs.items():
            text = _wait_for(process, "TRUTH ")
            truth = json.loads(text.splitlines()[-1].removeprefix("TRUTH "))
            _wait_for(process, "STEADY")
            capture = workdir / f"capture_{name}"
            result = cli(
                "capture", "--service", f"localhost:{port}", "--duration", "2s",
                "--out", str(capture),
            )  # fmt: skip
            assert result.returncode == 0, result.stderr
            # the job stops once captured: the next job's capture does not share the cores
            # with its matmuls (a busy machine's waits are not the next job's own)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
            analyzed, _, _ = analyze_one(capture)
            out[name] = (truth, analyzed)
    finally:
        for process, _ in jobs.values():
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
    return out


def test_a_device_bound_job_is_device_bound(captured) -> None:
    # GIVEN a job whose device needs far longer per step than its host (its own measurement)
    truth, result = captured["device"]
    assert truth["cadence_s"] > 5 * truth["host_cpu_s"]
    # WHEN its live capture is analyzed
    story = result.story
    # THEN the steady steps are device-bound: the sync's wait behind the queue is no host work
    assert story.bound == "device"
    assert story.bound_steps.get("device", 0) >= story.steady_steps - 1
    kinds = {f.kind.value for f in result.findings}
    assert "tracing_bound" not in kinds
    # AND the wait is there, measured as the host blocked on the device, not as its work
    assert story.host_blocked_s is not None and story.host_cpu_s is not None
    assert story.host_blocked_s > story.host_cpu_s


def test_a_tracing_bound_job_is_tracing_bound(captured) -> None:
    # GIVEN a job whose host traces far longer per step than its device runs the graph
    truth, result = captured["tracing"]
    assert truth["host_cpu_s"] > 5 * truth["execute_s"]
    # WHEN its live capture is analyzed
    story = result.story
    # THEN the steady steps are tracing-bound, and the analyzer says so too
    assert story.bound == "tracing"
    assert "tracing_bound" in {f.kind.value for f in result.findings}


def test_the_two_verdicts_differ(captured) -> None:
    # the complaint: both jobs got the same verdict from a CPU capture
    assert captured["device"][1].story.bound != captured["tracing"][1].story.bound
