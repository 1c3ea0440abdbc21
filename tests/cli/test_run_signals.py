"""`xlaprof run` and signals, on the real CPU runtime (issue 16).

Exit code 128+N when a signal ended the job, 130 for Ctrl-C; SIGINT and SIGTERM sent to
`xlaprof run` alone reach the job; a Ctrl-C before the job's run starts is reported as such;
a SIGKILL leaves run.json counts that match steps.jsonl; two runs into one --out at the same
time do not touch each other's run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, start_run, wait_for_steps

from xlaprof.rundir.reader import load_run, load_runs

pytestmark = pytest.mark.runtime

LONG_LOOP = (
    "import torch, torch_xla, time\n"
    "w = torch.randn(16, 16, device=torch_xla.device())\n"
    "for i in range(100000):\n"
    "    w = (w @ w).tanh()\n"
    "    torch_xla.sync()\n"
    "    time.sleep(0.01)\n"
)


def _long_run(tmp_path: Path, name: str = "run") -> tuple[subprocess.Popen, Path]:
    script = tmp_path / "long.py"
    script.write_text(LONG_LOOP)
    out = tmp_path / name
    process = start_run(out, [sys.executable, str(script)], stderr=subprocess.PIPE, text=True)
    return process, out


def _wait_steps(process: subprocess.Popen, out: Path, steps: int = 5) -> None:
    if not wait_for_steps(out, steps):
        process.kill()
        pytest.fail("the long run never reached its steps")


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_sigint_to_xlaprof_alone_reaches_the_job_and_exits_130(tmp_path: Path) -> None:
    # GIVEN a job mid-training under xlaprof run
    process, out = _long_run(tmp_path)
    _wait_steps(process, out)
    # WHEN SIGINT is sent to the xlaprof process only (not its group)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=120)
    # THEN the job got it (KeyboardInterrupt recorded) and xlaprof exits 128+SIGINT
    run = load_run(out)
    assert run.info.status == "interrupted", run.info
    assert run.info.detail.startswith("KeyboardInterrupt")
    assert process.returncode == 128 + signal.SIGINT


def test_ctrl_c_to_the_job_exits_130(tmp_path: Path) -> None:
    process, out = _long_run(tmp_path)
    _wait_steps(process, out)
    os.kill(_children(process.pid)[0], signal.SIGINT)
    process.wait(timeout=120)
    assert load_run(out).info.status == "interrupted"
    assert process.returncode == 128 + signal.SIGINT


def test_ctrl_c_before_the_run_starts_is_reported_as_an_interruption(tmp_path: Path) -> None:
    # GIVEN a job that is still importing (it sleeps before importing torch_xla)
    script = tmp_path / "slow_import.py"
    script.write_text("import time\ntime.sleep(60)\nimport torch_xla\n")
    out = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "xlaprof", "run", "--out", str(out), "--", sys.executable, script],
        env={**os.environ, "PJRT_DEVICE": "CPU"},
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)
    # WHEN Ctrl-C reaches xlaprof and the job
    process.send_signal(signal.SIGINT)
    _stdout, stderr = process.communicate(timeout=60)
    # THEN it says the job was interrupted, not that it never imported torch_xla
    assert process.returncode == 128 + signal.SIGINT
    assert "interrupted before the command started a run" in stderr
    assert "never imported torch_xla" not in stderr


def test_sigkill_leaves_counts_that_match_the_steps(tmp_path: Path) -> None:
    process, out = _long_run(tmp_path)
    _wait_steps(process, out, 8)
    os.kill(_children(process.pid)[0], signal.SIGKILL)
    process.wait(timeout=60)
    assert process.returncode == 128 + signal.SIGKILL
    run = load_run(out)
    rows = [line for line in (run.path / "steps.jsonl").read_text().split("\n") if line]
    assert run.info.status == "killed"
    assert run.info.steps_recorded == len(rows) >= 8


def test_run_json_is_kept_current_while_the_job_runs(tmp_path: Path) -> None:
    process, out = _long_run(tmp_path)
    try:
        _wait_steps(process, out, 5)
        time.sleep(1.5)  # run.json is rewritten at most once a second
        info = json.loads(next(out.glob("*/run.json")).read_text())
        assert info["status"] == "running" and info["steps_recorded"] >= 5
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)


def test_concurrent_runs_into_one_out_do_not_touch_each_other(tmp_path: Path) -> None:
    # GIVEN a long run into OUT, mid-training
    long_process, out = _long_run(tmp_path, "shared")
    try:
        _wait_steps(long_process, out)
        # WHEN a short run into the same OUT starts and finishes meanwhile
        script = tmp_path / "short.py"
        script.write_text(
            "import torch, torch_xla\n"
            "for _ in range(2):\n"
            "    torch.ones(2, device=torch_xla.device()).sum()\n"
            "    torch_xla.sync()\n"
        )
        short = start_run(out, [sys.executable, str(script)])
        assert short.wait(timeout=300) == 0
        # THEN the long run is still "running", not marked killed by the short one's xlaprof
        statuses = {r.info.pid: r.info.status for r in load_runs(out)}
        long_pid = _children(long_process.pid)[0]
        assert statuses[long_pid] == "running", statuses
        assert sorted(statuses.values()) == ["ok", "running"]
    finally:
        long_process.send_signal(signal.SIGTERM)
        long_process.wait(timeout=120)
    assert {r.info.status for r in load_runs(out)} == {"ok", "signal"}
