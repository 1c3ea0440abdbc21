"""Shared paths and helpers. CLI tests run the real command in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_traces"
DATA = Path(__file__).resolve().parent / "data"
EXAMPLES = REPO / "examples"


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout=300):
    """Run ``python -m xlaprof ARGS`` and return the CompletedProcess (text mode)."""
    full_env = {**os.environ, "PJRT_DEVICE": "CPU", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "xlaprof", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd or REPO,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def samples() -> Path:
    return SAMPLES


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


def start_run(out: Path, command: list[str], *options: str, **popen) -> subprocess.Popen:
    """``xlaprof run -q [options] --out OUT -- COMMAND`` in the background."""
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL)
    return subprocess.Popen(
        [sys.executable, "-m", "xlaprof", "run", "-q", *options, "--out", str(out), "--", *command],
        env={**os.environ, "PJRT_DEVICE": "CPU"},
        cwd=REPO,
        **popen,
    )


def wait_for_steps(out: Path, steps: int, timeout: float = 120) -> bool:
    """Wait until a run under ``out`` has recorded ``steps`` steps (warm-up compiles done)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        files = list(out.glob("*/steps.jsonl"))
        if files and len(files[0].read_text().splitlines()) >= steps:
            return True
        time.sleep(0.2)
    return False


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
