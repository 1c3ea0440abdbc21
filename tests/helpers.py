"""What the tests share, imported one way (``from helpers import ...``; ``tests/`` is on the
path through pytest's ``pythonpath``): where the inputs are, the CLI in a subprocess, long runs
under ``xlaprof run``, the JSON contract check and the names of the real captures.

Inputs that tests read from disk are looked up through ``sample_run``, ``sample_capture`` and
``shared_trace``: a missing file fails the test and names what was expected where, it never
skips it.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_traces"
DATA = Path(__file__).resolve().parent / "data"
EXAMPLES = REPO / "examples"
GPU_SAMPLES = SAMPLES / "gpu"
# Real TPU/GPU/Kineto captures with provenance: beside the project in CI, never copied into it.
TRACES = REPO.parent / "shared" / "traces"

# sample_traces/runs/<name>: `xlaprof run --trace-steps 4:6` of examples/<name>.py (README there)
SAMPLE_RUNS = (
    "cpu_fallback",
    "data_dependent_shape",
    "healthy_loop",
    "host_sync_item",
    "recompile_varying_batch",
    "scanned_layers",
    "tracing_bound_tiny_ops",
    "unrolled_layers",
)
# ../shared/traces: each with its ``.source.txt`` (provenance and an independent event count)
TPU = "xprof_tpu_inference_2_v1.xplane.pb"
MI300 = "tracelens_mi300_jax_conv_minimal_08.xplane.pb"
FUSED_ATTN = "tracelens_jax_te_fused_attn.xplane.pb"
HTA = "hta_cupti_profiler_benchmark.trace.json.gz"
MI210 = "tracelens_mi210_gpu_only.trace.json.gz"
SHARED_XPLANES = (TPU, MI300, FUSED_ATTN)
SHARED_CAPTURES = (*SHARED_XPLANES, HTA, MI210)
# sample_traces/gpu: real H100 captures with step markers (README there)
GPU_JAX = "jax_mlp_steps.xplane.pb"
GPU_TORCH = "torch_mlp_steps.pt.trace.json.gz"
# sample_traces/jax_cpu: a real JAX-on-CPU capture with step markers (README there)
JAX_CPU = "jax_cpu_mlp_steps.xplane.pb"

# Finding kinds whose verdict is a duration measured on this machine (compile seconds, host
# against device time). A run made during the test session gets them or not with the machine's
# speed, so end-to-end tests of fresh runs leave them out; their verdicts are tested on fixed
# inputs (recorded runs, built AnalysisInputs: tests/analyzers/test_slow_compile.py and
# test_tracing_bound.py).
TIMED_KINDS = (
    "slow_compile",
    "tracing_bound",
    "input_bound",
    "collective_bound",
    "async_wait",
    "host_bound",
)


def missing_input(path: Path, what: str) -> None:
    """Fail (never skip) the test that needs ``path``, saying what it is and where it comes from."""
    pytest.fail(f"{path} is missing: {what}", pytrace=False)


def sample_run(name: str) -> Path:
    """``sample_traces/runs/<name>``, which the repository holds."""
    path = SAMPLES / "runs" / name
    if not any(path.glob("*/run.json")):
        missing_input(path, "a sample run of the repository (make samples writes it)")
    return path


def step_model_run(name: str) -> Path:
    """``sample_traces/step_model/<name>``: a run with seven traced steps (regenerate.py)."""
    path = SAMPLES / "step_model" / name
    if not any(path.glob("*/run.json")):
        missing_input(path, "a recorded run of the repository (make samples writes it)")
    return path


def step_model_capture(name: str) -> Path:
    """The xplane capture inside ``sample_traces/step_model/<name>``, to read alone."""
    found = sorted(step_model_run(name).glob("*/plugins/profile/*/*.xplane.pb"))
    if len(found) != 1:
        missing_input(step_model_run(name) / "*/plugins/profile/*/*.xplane.pb", "its capture")
    return found[0]


def sample_capture(name: str) -> Path:
    """The xplane capture inside ``sample_traces/runs/<name>`` (its --trace-steps window)."""
    found = sorted(sample_run(name).glob("*/plugins/profile/*/*.xplane.pb"))
    if len(found) != 1:
        missing_input(sample_run(name) / "*/plugins/profile/*/*.xplane.pb", "its one capture")
    return found[0]


def shared_trace(name: str) -> Path:
    """``../shared/traces/<name>``: a real capture CI keeps beside the project."""
    path = TRACES / name
    if not path.is_file():
        missing_input(
            path,
            "a real capture of ../shared/traces (CI checks the project out beside shared/; "
            f"expected there: {', '.join(SHARED_CAPTURES)} and each one's .source.txt)",
        )
    return path


def session_folder(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder ``name`` made once for the whole test session: under pytest-xdist, in the
    folder above the workers' own temporary ones, which they share, so a session fixture that
    records into it (under a lock of its own) runs once, not once per worker."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


@contextlib.contextmanager
def made_once(folder: Path, name: str) -> Iterator[bool]:
    """Whether ``name`` in ``folder`` (a ``session_folder``) is still to be made, under its own
    lock: True to the first worker that asks, which makes it inside the block (marked done
    when the block ends without an error); False to every later one, which reads it."""
    from filelock import FileLock

    with FileLock(str(folder / f"{name}.lock")):
        done = folder / f"{name}.done"
        todo = not done.exists()
        yield todo
        if todo:
            done.touch()


def timeless(kinds: list[str]) -> list[str]:
    """``kinds`` without those whose verdict depends on this machine's speed (TIMED_KINDS)."""
    return [kind for kind in kinds if kind not in TIMED_KINDS]


def timeless_findings(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``findings`` (JSON) without those of kinds whose verdict depends on this machine's speed."""
    return [f for f in findings if f["kind"] not in TIMED_KINDS]


# Subcommands that read inputs and print an answer run in the test's own process (click's test
# runner): a new interpreter and xlaprof's imports cost ~0.8 CPU s a call, and the suite makes
# hundreds of these calls. The others start jobs, take signals or serve, and always get a process
# of their own, as does any call with ``XLAPROF_DEBUG`` (it sets up logging for the process).
IN_PROCESS = frozenset({"analyze", "check", "diff", "report"})
# Python's own warning filters in a fresh interpreter (no -W, no PYTHONWARNINGS): what a user's
# stderr would show, so a test of "no warning reaches the user" sees what a process would.
_FRESH_INTERPRETER_IGNORES = (
    DeprecationWarning,
    PendingDeprecationWarning,
    ImportWarning,
    ResourceWarning,
)


def cli(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout=300,
    process: bool = False,
) -> subprocess.CompletedProcess:
    """Run ``python -m xlaprof ARGS`` and return the CompletedProcess (text mode).

    ``analyze``, ``check``, ``diff`` and ``report`` run in this process (``IN_PROCESS``) unless
    ``process`` is set; the result is the same either way: exit code, stdout, stderr (an error
    that escapes the command shows its traceback there, as Python would)."""
    full_env = {**os.environ, "PJRT_DEVICE": "CPU", **(env or {})}
    if not process and args and args[0] in IN_PROCESS and "XLAPROF_DEBUG" not in full_env:
        return _cli_here(list(args), full_env, cwd or REPO, timeout)
    return subprocess.run(
        [sys.executable, "-m", "xlaprof", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd or REPO,
        timeout=timeout,
    )


class _Expired(BaseException):
    """An in-process ``cli`` call ran past its timeout."""


def _cli_here(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess:
    """``cli`` in this process: the environment, working directory, warning filters and root
    log handlers a fresh ``python -m xlaprof`` would have, all put back afterwards; a call
    that outlives ``timeout`` raises ``TimeoutExpired`` as ``subprocess.run`` would."""
    import logging
    import traceback
    import warnings

    from click.testing import CliRunner

    from xlaprof.cli import main

    command = [sys.executable, "-m", "xlaprof", *args]

    def expired(signum: int, frame: Any) -> None:
        raise _Expired  # not an Exception: no handler of the command's can take it for its own

    saved_env = dict(os.environ)
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    previous_alarm = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        os.environ.clear()  # the call's whole environment, as a new process would get it
        os.environ.update(env)
        # No root handler, as in a fresh interpreter: a logged warning reaches stderr through
        # logging's last-resort handler, which writes to the runner's stderr.
        root.handlers, root.level = [], logging.WARNING
        with contextlib.chdir(cwd), warnings.catch_warnings():
            warnings.resetwarnings()
            for category in _FRESH_INTERPRETER_IGNORES:
                warnings.simplefilter("ignore", category)
            result = CliRunner().invoke(main, args, prog_name="xlaprof")
    except _Expired:
        raise subprocess.TimeoutExpired(command, timeout) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_alarm)
        root.handlers, root.level = saved_handlers, saved_level
        os.environ.clear()
        os.environ.update(saved_env)
    stderr, code = result.stderr, result.exit_code
    error = result.exception
    if error is not None and not isinstance(error, SystemExit):
        stderr += "".join(traceback.format_exception(error))
        code = 1
    return subprocess.CompletedProcess(command, code, result.stdout, stderr)


def analyze_json(path: Path, *options: str) -> dict[str, Any]:
    """The document of ``xlaprof analyze --json [options] PATH``, which must succeed cleanly."""
    result = cli("analyze", "--json", *options, str(path))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def recorded_and_analyzed(
    record: Callable[[str, Path], Path], names: list[str], root: Path
) -> dict[str, tuple[dict[str, Any], Path] | Exception]:
    """Each name recorded into ``root / name`` by ``record`` (a job: two at a time, the suite's
    2 cores), then analyzed here (``analyze --json`` in this process, one after another: the
    in-process ``cli`` sets this process's environment, so never from two threads); per name,
    its document and folder, or the error that stopped it."""
    from concurrent.futures import ThreadPoolExecutor

    def one(name: str) -> Path | Exception:
        try:
            return record(name, root / name)
        except (RuntimeError, OSError) as error:
            return error

    with ThreadPoolExecutor(max_workers=2) as pool:
        targets = dict(zip(names, pool.map(one, names), strict=True))
    out: dict[str, tuple[dict[str, Any], Path] | Exception] = {}
    for name, target in targets.items():
        if isinstance(target, Exception):
            out[name] = target
            continue
        done = cli("analyze", "--json", str(target))
        if done.returncode != 0:
            out[name] = RuntimeError(f"{name}: analyze exited {done.returncode}: {done.stderr}")
            continue
        out[name] = (json.loads(done.stdout), root / name)
    return out


def profiled_run(script: Path, out: Path, *options: str) -> Path:
    """Run ``script`` under ``xlaprof run -q OPTIONS --out OUT``; its one run directory."""
    done = cli("run", "-q", *options, "--out", str(out), "--", sys.executable, str(script))
    assert done.returncode == 0, done.stderr[-2000:]
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run


def interruptible() -> None:
    """In a child before it runs: SIGINT back to its default action.

    A shell without job control starts its background commands with SIGINT ignored, and an
    ignored signal stays ignored through exec: a suite started that way (``make test &`` in a
    script) would start every job with Ctrl-C ignored, which no terminal does. The tests that
    interrupt a job start it with this (``preexec_fn``), so they test what a user's Ctrl-C does.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_run(out: Path, command: list[str], *options: str, **popen: Any) -> subprocess.Popen:
    """``xlaprof run -q [options] --out OUT -- COMMAND`` in the background (SIGINT at its
    default, see ``interruptible``)."""
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL)
    popen.setdefault("preexec_fn", interruptible)
    return subprocess.Popen(
        [sys.executable, "-m", "xlaprof", "run", "-q", *options, "--out", str(out), "--", *command],
        env={**os.environ, "PJRT_DEVICE": "CPU"},
        cwd=REPO,
        **popen,
    )


def wait_for_steps(out: Path, steps: int, timeout: float = 300) -> bool:
    """Wait until a run under ``out`` has recorded ``steps`` steps (warm-up compiles done).

    The timeout only bounds a run that never gets there: a loaded machine takes longer, and
    nothing is judged on how long it took.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        files = list(out.glob("*/steps.jsonl"))
        if files and len(files[0].read_text().splitlines()) >= steps:
            return True
        time.sleep(0.2)
    return False


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (the job under an ``xlaprof run``)."""
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


# A job that steps until it is stopped: a sync and a 10 ms sleep each step.
LONG_LOOP = (
    "import torch, torch_xla, time\n"
    "w = torch.randn(16, 16, device=torch_xla.device())\n"
    "for i in range(100000):\n"
    "    w = (w @ w).tanh()\n"
    "    torch_xla.sync()\n"
    "    time.sleep(0.01)\n"
)


def start_long_run(
    tmp_path: Path, name: str = "run", steps: int = 5
) -> tuple[subprocess.Popen, Path]:
    """``LONG_LOOP`` under ``xlaprof run --out tmp_path/name``, once it has recorded ``steps``."""
    script = tmp_path / "long.py"
    script.write_text(LONG_LOOP)
    out = tmp_path / name
    process = start_run(out, [sys.executable, str(script)], stderr=subprocess.PIPE, text=True)
    LONG_RUNS.append(process)
    if not wait_for_steps(out, steps):
        pytest.fail(f"the long run never reached {steps} steps")
    return process, out


# The long runs a test started: a test that fails before its run ends would leave the job
# stepping for hours; stop_long_runs (tests/cli/conftest.py, after each test) ends them.
LONG_RUNS: list[subprocess.Popen] = []


def stop_long_runs() -> None:
    """Kill what is left of the long runs started so far: each job, then its ``xlaprof run``."""
    while LONG_RUNS:
        process = LONG_RUNS.pop()
        if process.poll() is None:
            for pid in children(process.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            process.kill()
        process.wait(timeout=60)


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def view_runs(path: Path, timeout: float = 300) -> list[str]:
    """Start ``xlaprof view PATH``, read the UI's run list (``run/``, sorted), stop it."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "xlaprof", "view", str(path), "--port", str(port)],
        cwd=REPO,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == f"http://localhost:{port}/"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                url = f"http://localhost:{port}/data/plugin/profile/runs"
                with urllib.request.urlopen(url, timeout=5) as response:
                    body = response.read()
                    if response.headers.get("Content-Encoding") == "gzip":
                        body = gzip.decompress(body)
                    return sorted(run.split("/")[0] + "/" for run in json.loads(body))
            except OSError:
                time.sleep(0.5)
        raise AssertionError("the UI never answered")
    finally:
        process.terminate()
        process.wait(timeout=30)


def line_of(example: str, needle: str) -> int:
    """1-based line of the first line in examples/<example>.py that contains ``needle``."""
    lines = (EXAMPLES / f"{example}.py").read_text().splitlines()
    for number, line in enumerate(lines, start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {example}")


def _optional(value: Any, kind: type | tuple[type, ...]) -> bool:
    return value is None or (isinstance(value, kind) and not isinstance(value, bool))


def check_contract(document: dict[str, Any]) -> None:
    """Assert ``document`` has every key and type of xlaprof.analysis/1 (docs/json-format.md)."""
    assert document["schema"] == "xlaprof.analysis/1"
    for report in document["reports"]:
        for name, metric in report["metrics"].items():
            assert isinstance(name, str)
            assert _optional(metric["total_samples"], int)
            assert _optional(metric["accumulator"], (int, float))
            assert metric["unit"] in ("s", "B", "")
        for name, value in report["counters"].items():
            assert isinstance(name, str) and _optional(value, int)
    for event in document["debug_events"]:
        assert event["kind"] in ("compilation", "execution")
        assert _optional(event["cause"], str) and _optional(event["graph_hash"], str)
        assert _optional(event["graph_inputs"], int) and _optional(event["graph_outputs"], int)
        for frame in event["frames"]:
            assert isinstance(frame["function"], str)
            assert _optional(frame["file"], str) and _optional(frame["line"], int)
    summary = document["summary"]
    for key in ("compiles", "executions", "device_to_host_transfers"):
        assert _optional(summary[key], int)
    assert all(_optional(v, int) for v in summary["aten_fallbacks"].values())
    for finding in document["findings"]:
        assert isinstance(finding["kind"], str)
        assert finding["severity"] in ("info", "warning", "error")
        assert isinstance(finding["title"], str) and finding["title"]
        location = finding["location"]
        assert location is None or (
            isinstance(location["file"], str) and isinstance(location["line"], int)
        )
        assert isinstance(finding["evidence"], dict)
        assert isinstance(finding["suggestion"], str) and finding["suggestion"]
    # one entry per finding kind: found, measured and found nothing, or not measured and why
    statuses = {entry["kind"]: entry for entry in document["analyzers"]}
    assert len(statuses) == len(document["analyzers"])
    for entry in document["analyzers"]:
        assert entry["status"] in ("found", "nothing_found", "not_measured")
        assert (entry["why"] is not None) == (entry["status"] == "not_measured")
        assert entry["why"] is None or isinstance(entry["why"], str)
    found = {f["kind"] for f in document["findings"]}
    assert found == {k for k, e in statuses.items() if e["status"] == "found"}


def link_each(names: list[str] | tuple[str, ...], source: Path, root: Path) -> dict[str, Path]:
    """Each capture in ``source`` linked into a folder of its own under ``root``.

    XProf's converters and the pod cache write files beside a capture: linked, nothing lands
    next to the real captures (``../shared/traces``, ``sample_traces/gpu``).
    """
    links = {}
    for name in names:
        folder = root / name.split(".")[0]
        folder.mkdir()
        (folder / name).symlink_to(source / name)
        links[name] = folder / name
    return links


def gpu_sample(name: str) -> Path:
    """``sample_traces/gpu/<name>``: the H100 captures and the script's record of them."""
    path = GPU_SAMPLES / name
    if not path.is_file():
        missing_input(path, "an H100 capture of the repository (sample_traces/gpu/README.md)")
    return path


def dynamo_rows() -> list[dict[str, Any]]:
    """The rows of ``tests/data/dynamo.jsonl`` (dynamo's own messages; tests/data/README.md)."""
    return [json.loads(line) for line in (DATA / "dynamo.jsonl").read_text().splitlines()]


def findings_for(*paths: Path) -> list[Any]:
    """The findings ``xlaprof analyze`` makes of these log files (load, then every analyzer)."""
    from xlaprof.analyzers import run_analyzers
    from xlaprof.inputs.paths import load_text_inputs

    data, _sources = load_text_inputs(list(paths))
    return run_analyzers(data)


# A job on the live runtime that prints both metrics reports, with PT_XLA_DEBUG_LEVEL=2 and the
# fallback tracker on (conftest.live_runtime_job runs it once a session): five batches of which
# three sizes are new after the first (the loop's sync compiles each), then three reads of a
# CPU fallback (torch.median).
LIVE_RUNTIME_JOB = """
import torch, torch_xla
import torch_xla.debug.metrics as met
device = torch_xla.device()
w = torch.randn(8, 4, device=device)
torch_xla.sync()  # materialize w so the loop's graphs differ only by batch size
for batch in (4, 4, 6, 4, 3):
    x = torch.randn(batch, 8, device=device)
    y = (x @ w).relu().sum()
    torch_xla.sync()  # LOOP SYNC
for _ in range(3):
    print(torch.median(x).item())  # MEDIAN
print(met.metrics_report())
print(met.short_metrics_report())
"""


def live_runtime_line(marker: str) -> int:
    """The line of ``LIVE_RUNTIME_JOB`` that holds ``marker``."""
    return next(i for i, text in enumerate(LIVE_RUNTIME_JOB.splitlines(), 1) if marker in text)


def jax_cpu_sample(name: str = JAX_CPU) -> Path:
    """``sample_traces/jax_cpu/<name>``: the JAX-on-CPU capture and the script's record of it."""
    path = SAMPLES / "jax_cpu" / name
    if not path.is_file():
        missing_input(path, "a JAX-on-CPU capture of the repository (sample_traces/jax_cpu)")
    return path


def without_saved_line(text: str) -> str:
    """A console report of a saved result as the original's reads: without the line naming the
    saved file, and the original's header as it leads then."""
    from xlaprof.report.console import MADE_FROM, SAVED_WORDS

    lines = [line for line in text.split("\n") if not line.endswith(SAVED_WORDS)]
    return "\n".join(
        "xlaprof analyze " + line[len(MADE_FROM) :] if line.startswith(MADE_FROM) else line
        for line in lines
    )


def html_without_saved_rows(page: bytes) -> bytes:
    """An HTML report of a saved result as the original's reads: without the row naming the
    saved file, and the original's row named ``source`` again."""
    import re

    page = re.sub(rb"<tr><td>read</td><td>[^<]*</td></tr>", b"", page, count=1)
    return page.replace(b"<tr><td>made from</td>", b"<tr><td>source</td>", 1)


def without_read_from(text: str) -> dict[str, Any]:
    """A ``--json`` document written from a saved one, without the key naming the file read."""
    document: dict[str, Any] = json.loads(text)
    document.get("view", {}).pop("read_from", None)
    return document


def analyzed_inputs(path: Path, warmup_steps: int = 2) -> Any:
    """``path``'s first process analyzed as ``xlaprof analyze`` does (its latest run), beside
    the part and trace it was analyzed from (``pipeline.AnalyzedPart``): what a test of the
    tables compares the finished result with."""
    from xlaprof.inputs.choose import choose
    from xlaprof.inputs.paths import load_parts
    from xlaprof.model.request import DEFAULT_MAX_INPUT_BYTES, PodSettings
    from xlaprof.pipeline import analyze_inputs

    pod = PodSettings.of(os.environ)  # as a command reads it
    parts = load_parts([path], DEFAULT_MAX_INPUT_BYTES, warmup_steps, pod=pod)
    return analyze_inputs(choose(parts, None, str(path)).parts[:1])[0]
