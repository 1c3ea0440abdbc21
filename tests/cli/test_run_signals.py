"""`xlaprof run` and signals, on the real CPU runtime (issue 16): every way a job ends.

Exit code 128+N when a signal ended the job, 130 for Ctrl-C; SIGINT and SIGTERM sent to
`xlaprof run` alone reach the job; a Ctrl-C before the job's run starts is reported as such;
a SIGKILL leaves run.json counts that match steps.jsonl; two runs into one --out at the same
time do not touch each other's run. Nothing here waits a fixed time: each test waits for what
it needs (steps recorded, the job started), with a deadline only a hang reaches.
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
from helpers import REPO, children, cli, interruptible, start_long_run, start_run

from xlaprof.rundir.reader import load_run, load_runs

pytestmark = pytest.mark.runtime


def test_sigterm_mid_training_leaves_a_loadable_run(tmp_path: Path) -> None:
    # GIVEN a job under xlaprof run, mid-training
    process, out = start_long_run(tmp_path)
    # WHEN the scheduler sends SIGTERM to xlaprof
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=120)
    # THEN the exit code is the script's (killed by SIGTERM) and the run is complete and loadable
    assert process.returncode == 128 + signal.SIGTERM
    run = load_run(out)
    assert run.info.status == "signal" and run.info.exit_code == 128 + signal.SIGTERM
    assert "Terminated" in run.info.detail
    steps = run.steps()
    assert len(steps) >= 5 and list(steps["step"]) == list(range(len(steps)))
    assert (run.path / "metrics" / "final.txt").read_text().startswith("Metric:")
    assert cli("analyze", str(out)).returncode == 0


def test_sigkill_leaves_a_loadable_run_whose_counts_match_the_steps(tmp_path: Path) -> None:
    # GIVEN a job under xlaprof run that has recorded 8 steps
    process, out = start_long_run(tmp_path, steps=8)
    # WHEN the job itself is killed (SIGKILL: no handler runs in it)
    os.kill(children(process.pid)[0], signal.SIGKILL)
    process.wait(timeout=60)
    # THEN xlaprof exits as the job did, run.json says killed and counts what steps.jsonl holds,
    # and the run analyzes
    assert process.returncode == 128 + signal.SIGKILL
    run = load_run(out)
    rows = [line for line in (run.path / "steps.jsonl").read_text().split("\n") if line]
    assert run.info.status == "killed" and "SIGKILL" in run.info.detail
    assert run.info.steps_recorded == len(rows) >= 8
    assert len(run.steps()) >= 5
    assert cli("analyze", "--json", str(out)).returncode == 0


def test_ctrl_c_to_the_job_is_recorded_and_exits_130(tmp_path: Path) -> None:
    # GIVEN a job mid-training WHEN Ctrl-C in a terminal reaches the whole process group (the
    # script gets SIGINT)
    process, out = start_long_run(tmp_path)
    os.kill(children(process.pid)[0], signal.SIGINT)
    process.wait(timeout=120)
    # THEN xlaprof exits 130 (128 + SIGINT, as a shell reports Ctrl-C) and the run says so
    assert process.returncode == 128 + signal.SIGINT
    run = load_run(out)
    assert run.info.status == "interrupted" and run.info.detail.startswith("KeyboardInterrupt")
    assert len(run.steps()) >= 5


def test_sigint_to_xlaprof_alone_reaches_the_job_and_exits_130(tmp_path: Path) -> None:
    # GIVEN a job mid-training under xlaprof run
    process, out = start_long_run(tmp_path)
    # WHEN SIGINT is sent to the xlaprof process only (not its group)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=120)
    # THEN the job got it (KeyboardInterrupt recorded) and xlaprof exits 128+SIGINT
    run = load_run(out)
    assert run.info.status == "interrupted", run.info
    assert run.info.detail.startswith("KeyboardInterrupt")
    assert process.returncode == 128 + signal.SIGINT


def test_ctrl_c_before_the_run_starts_is_reported_as_an_interruption(tmp_path: Path) -> None:
    # GIVEN a job that is still importing: it says it is ready, then sleeps before importing
    # torch_xla (longer than any test waits: only the Ctrl-C ends it)
    ready = tmp_path / "ready"
    script = tmp_path / "slow_import.py"
    script.write_text(
        "import sys, time\nopen(sys.argv[1], 'w').close()\ntime.sleep(3600)\nimport torch_xla\n"
    )
    out = tmp_path / "run"
    command = [sys.executable, str(script), str(ready)]
    process = subprocess.Popen(
        [sys.executable, "-m", "xlaprof", "run", "--out", str(out), "--", *command],
        env={**os.environ, "PJRT_DEVICE": "CPU"},
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    # WHEN Ctrl-C reaches xlaprof once the job says it runs (still before its imports: its run
    # has not started); the deadlines bound a hang, not a slow machine
    deadline = time.monotonic() + 300
    while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists(), "the job never started"
    process.send_signal(signal.SIGINT)
    _stdout, stderr = process.communicate(timeout=300)
    # THEN it says the job was interrupted, not that it never imported torch_xla
    assert process.returncode == 128 + signal.SIGINT
    assert "interrupted before the command started a run" in stderr
    assert "never imported torch_xla" not in stderr


def test_a_signal_while_the_job_is_being_started_reaches_it() -> None:
    from xlaprof.cli.run import SignalForwarder

    # GIVEN xlaprof run's forwarder, SIGINT handled (not ignored, as in a terminal)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with SignalForwarder() as forwarder:
            # WHEN SIGINT arrives before the job exists (a `kill -INT` while xlaprof starts it)
            os.kill(os.getpid(), signal.SIGINT)
            # (a job with no SIGINT handler of its own: it ends by the signal, whenever it
            # comes; a Python job interrupted during its start-up exits 1 instead)
            child = subprocess.Popen(["sleep", "300"])
            returncode = forwarder.wait(child)
    finally:
        signal.signal(signal.SIGINT, previous)
    # THEN the job gets it as soon as it is started (it was lost: the job slept on), and ends
    assert forwarder.interrupted
    assert returncode == -signal.SIGINT


def test_run_json_is_kept_current_while_the_job_runs(tmp_path: Path) -> None:
    process, out = start_long_run(tmp_path)
    try:
        # GIVEN a job that has recorded 5 steps WHEN its run.json is read while it runs
        # (rewritten at most once a second, as steps are recorded) THEN it says so: running,
        # with those steps, within a deadline only a run.json never rewritten reaches
        deadline = time.monotonic() + 300
        info = json.loads(next(out.glob("*/run.json")).read_text())
        while info["steps_recorded"] < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
            info = json.loads(next(out.glob("*/run.json")).read_text())
        assert info["status"] == "running" and info["steps_recorded"] >= 5
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)


def test_concurrent_runs_into_one_out_do_not_touch_each_other(tmp_path: Path) -> None:
    # GIVEN a long run into OUT, mid-training
    long_process, out = start_long_run(tmp_path, "shared")
    try:
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
        long_pid = children(long_process.pid)[0]
        assert statuses[long_pid] == "running", statuses
        assert sorted(statuses.values()) == ["ok", "running"]
    finally:
        long_process.send_signal(signal.SIGTERM)
        long_process.wait(timeout=120)
    assert {r.info.status for r in load_runs(out)} == {"ok", "signal"}
