"""Fixtures the whole suite shares, and its settings.

Tests import what they share from ``helpers`` (paths, the CLI in a subprocess, long runs). A
fixture whose input is missing fails every test that needs it, naming what was expected where;
none skips.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from decode import Decoded, decode_kineto, decode_xspace
from helpers import (
    DATA,
    GPU_JAX,
    GPU_SAMPLES,
    GPU_TORCH,
    LIVE_RUNTIME_JOB,
    SAMPLE_RUNS,
    SAMPLES,
    SHARED_CAPTURES,
    SHARED_XPLANES,
    TRACES,
    cli,
    gpu_sample,
    jax_cpu_sample,
    link_each,
    made_once,
    missing_input,
    sample_run,
    session_folder,
    shared_trace,
)

from xlaprof.inputs.traces import load_trace
from xlaprof.model.document_id import SELF_CHECK_ENV

# Every --json document written in the suite, in its own process or one it starts, is checked
# against the schema it is read back by before it is written (users' runs skip the check and
# the import of its models).
os.environ[SELF_CHECK_ENV] = "1"

# A property holds or not whatever the machine's speed: no per-example deadline (hypothesis'
# default of 200 ms fails an example on a busy machine, not on a wrong answer).
hypothesis.settings.register_profile("xlaprof", deadline=None)
hypothesis.settings.load_profile("xlaprof")

# sample_traces/<name>.log: a job's log of examples/<name>.py (sample_traces/README.md)
SAMPLE_LOGS = ("healthy_loop", "recompile_varying_batch", "host_sync_item", "cpu_fallback")


@pytest.fixture(scope="session")
def samples() -> Path:
    """``sample_traces/``: the examples' job logs and run directories, which the repository
    holds."""
    for name in SAMPLE_LOGS:
        if not (SAMPLES / f"{name}.log").is_file():
            missing_input(SAMPLES / f"{name}.log", "a sample job log (make samples writes it)")
    for name in SAMPLE_RUNS:
        sample_run(name)
    return SAMPLES


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``tests/data``: hand-built inputs in the shapes real logs take (README there)."""
    return DATA


# ---------------------------------------------------------------- ../shared/traces


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """``../shared/traces``, with every capture the tests read and each one's provenance."""
    for name in SHARED_CAPTURES:
        shared_trace(name)
        shared_trace(f"{name}.source.txt")
    return TRACES


@pytest.fixture(scope="session")
def shared_linked(shared_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each shared capture linked into its own temporary folder (XProf writes a cache beside
    its input, which must never land in ``../shared/traces``)."""
    return link_each(SHARED_CAPTURES, shared_traces, tmp_path_factory.mktemp("captures"))


@pytest.fixture(scope="session")
def traces(shared_linked: dict[str, Path]) -> dict[str, Any]:
    """Each shared capture loaded once (``load_trace``)."""
    return {name: load_trace(path) for name, path in shared_linked.items()}


@pytest.fixture(scope="session")
def xprof(shared_linked: dict[str, Path]) -> dict[tuple[str, str], Any]:
    """XProf's converters on each shared xplane, run once per test session (about 0.1 s each)."""
    from xprof.convert.raw_to_tool_data import xspace_to_tool_data

    results = {}
    for name in SHARED_XPLANES:
        for tool in ("overview_page", "op_profile", "hlo_stats", "framework_op_stats"):
            data, _ = xspace_to_tool_data(
                [str(shared_linked[name])], tool, {"use_saved_result": False}
            )
            results[(name, tool)] = json.loads(data)
    return results


# ---------------------------------------------------------------- sample_traces/gpu (H100)


@pytest.fixture(scope="session")
def gpu_linked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The H100 captures linked into temporary folders: nothing is written next to them."""
    for name in (GPU_JAX, GPU_TORCH, "capture_gpu.json"):
        gpu_sample(name)
    return link_each([GPU_JAX, GPU_TORCH], GPU_SAMPLES, tmp_path_factory.mktemp("gpu"))


@pytest.fixture(scope="session")
def jax_cpu_trace() -> Any:
    """The JAX-on-CPU capture (sample_traces/jax_cpu), loaded once."""
    return load_trace(jax_cpu_sample())


@pytest.fixture(scope="session")
def jax_cpu_document() -> dict[str, Any]:
    """``xlaprof analyze --json`` of the JAX-on-CPU capture, run once."""
    done = cli("analyze", "--json", str(jax_cpu_sample()))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="session")
def gpu_facts() -> dict[str, Any]:
    """The H100 script's own record of its captures (``capture_gpu.json``): which steps exist,
    which step slept on the host, each step's wall time on the script's clock."""
    return json.loads(gpu_sample("capture_gpu.json").read_text())


@pytest.fixture(scope="session")
def jax_xspace() -> Decoded:
    """The JAX capture, decoded independently (decode.decode_xspace)."""
    return decode_xspace(gpu_sample(GPU_JAX))


@pytest.fixture(scope="session")
def kineto_events() -> list[dict[str, Any]]:
    """The PyTorch profiler capture's trace events, read with gzip + json."""
    return decode_kineto(gpu_sample(GPU_TORCH))


@pytest.fixture(scope="session")
def jax_trace(gpu_linked: dict[str, Path]) -> Any:
    return load_trace(gpu_linked[GPU_JAX])


@pytest.fixture(scope="session")
def torch_trace(gpu_linked: dict[str, Path]) -> Any:
    return load_trace(gpu_linked[GPU_TORCH])


@pytest.fixture(scope="session")
def input_pipeline(gpu_linked: dict[str, Path]) -> dict[int, dict[str, Any]]:
    """XProf's input_pipeline_analyzer on the JAX capture: its per-step rows by step number,
    and its conclusion under the key -1."""
    from xprof.convert.raw_to_tool_data import xspace_to_tool_data

    data, _ = xspace_to_tool_data(
        [str(gpu_linked[GPU_JAX])], "input_pipeline_analyzer", {"use_saved_result": False}
    )
    table = json.loads(data)[1]
    columns = [c["id"] for c in table["cols"]]
    rows = {}
    for row in table["rows"]:
        values = dict(zip(columns, [cell.get("v") for cell in row["c"]], strict=True))
        rows[int(values["stepnum"])] = values
    rows[-1] = table["p"]
    return rows


# ---------------------------------------------------------------- the live runtime


@pytest.fixture(scope="session")
def live_runtime_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Path]:
    """``helpers.LIVE_RUNTIME_JOB`` run once on the real runtime: its stdout (both metrics
    reports), its stderr (the PT_XLA_DEBUG log) and the fallback tracker's file.

    Once for the whole session, not once per worker (the metrics-report and debug-log tests
    sit on either worker): the first worker to ask runs it into the folder the workers share,
    under a lock, and the other reads what it kept."""
    workdir = session_folder(tmp_path_factory, "live_runtime")
    stdout, stderr, tracker = (workdir / n for n in ("stdout.txt", "stderr.txt", "fallbacks.txt"))
    with made_once(workdir, "job") as todo:
        if todo:
            script = workdir / "job.py"
            script.write_text(LIVE_RUNTIME_JOB)
            tracker.unlink(missing_ok=True)  # an earlier try that failed
            env = {
                **os.environ,
                "PJRT_DEVICE": "CPU",
                "PT_XLA_DEBUG_LEVEL": "2",
                "XLA_FNTRACKER_FILE": str(tracker),
            }
            result = subprocess.run(
                [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600
            )
            assert result.returncode == 0, result.stderr[-2000:]
            stdout.write_text(result.stdout)
            stderr.write_text(result.stderr)
    return stdout.read_text(), stderr.read_text(), tracker
