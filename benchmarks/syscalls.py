"""What the stepping thread asks of the kernel per steady step, bare and under ``xlaprof run``.

``python benchmarks/syscalls.py [--workload tiny] [--seconds 5]`` runs one workload of
``overhead_loop.py`` as a bare process, as a bare process with torch_xla's level-2 debug log
written to a file (what ``xlaprof run`` turns on) and under the default ``xlaprof run``, attaches
``strace -c`` to the stepping (main) thread after warm-up for ``--seconds`` and prints the
system calls per step of each, by name.

Why: a step's host work on the CPU runtime makes almost no system calls of its own (a few futex
waits), so each call a profiler adds lands on a cold kernel path in the middle of the training
thread's work. Counts are exact and do not depend on the machine's speed, unlike the step-time
ratios of ``overhead.py``, so this inventory says precisely what per-step work xlaprof and
torch_xla's ``PT_XLA_DEBUG_LEVEL=2`` log add; ``overhead.py`` says what it costs. strace slows the
traced thread, so the step times printed here are not overhead figures.

Needs ``strace`` and permission to attach to a child process (ptrace); says so and exits 2
without them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This folder is on sys.path when the script runs: the same environment as overhead.py's runs.
from overhead import STEADY_ENV

# The bare loop; torch_xla's own level-2 log alone (what PT_XLA_DEBUG_LEVEL=2 with a file adds,
# as xlaprof run sets it); the default ``xlaprof run``.
VARIANTS = ("bare", "bare + level 2", "xlaprof")
WARMUP = 80  # steps: past the first compilations and xlaprof's IR-debug warm-up (FLAT_STEPS)
# One line of ``strace -c`` output: % time, seconds, usecs/call, calls, [errors], syscall.
_ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")


def child(workload: str, marker: Path, seconds: float) -> None:
    """The traced process: warm up, say its pid, step for ``seconds``, write step end times."""
    import torch_xla
    from overhead_loop import _workload

    body = _workload(workload)
    for _ in range(WARMUP):
        body()
        torch_xla.sync()
    ends: list[float] = []
    marker.write_text(str(os.getpid()))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        body()
        torch_xla.sync()
        ends.append(time.monotonic())
    marker.with_suffix(".steps").write_text(json.dumps(ends))


def parse_strace(text: str) -> dict[str, int]:
    """Calls by system call name from ``strace -c`` output."""
    calls: dict[str, int] = {}
    for line in text.splitlines():
        match = _ROW.match(line)
        if match and match.group(2) != "total":
            calls[match.group(2)] = int(match.group(1))
    return calls


def trace(
    command: list[str], marker: Path, seconds: float, env: dict[str, str]
) -> tuple[dict[str, int], int]:
    """Run ``command`` (a child of this script), strace its main thread for most of its
    stepping; return the calls seen and the steps that ended while strace was attached."""
    report = marker.with_suffix(".strace")
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    while not marker.exists() or not marker.read_text():
        if process.poll() is not None:
            raise SystemExit(f"the {command[0]} process exited before warm-up ended")
        time.sleep(0.1)
    pid = marker.read_text()
    time.sleep(0.3)  # let the first steps after the marker pass
    start = time.monotonic()
    # -p attaches to the thread given only: the stepping thread, not the runtime's workers.
    # strace -c writes its table when interrupted, so it is stopped well before the child ends.
    strace = subprocess.Popen(
        ["strace", "-c", "-p", pid, "-o", str(report)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(seconds * 0.6)
    strace.send_signal(signal.SIGINT)
    _, errors = strace.communicate(timeout=30)
    end = time.monotonic()
    process.wait(timeout=seconds + 120)
    calls = parse_strace(report.read_text()) if report.exists() else {}
    if not calls:
        last = errors.strip().splitlines()[-1:] or ["no report"]
        raise SystemExit(f"strace could not trace pid {pid}: {last[0]}")
    ends = json.loads(marker.with_suffix(".steps").read_text())
    steps = sum(1 for t in ends if start <= t <= end)
    return calls, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="tiny", help="an overhead_loop.py workload (tiny)")
    parser.add_argument("--seconds", type=float, default=5.0, help="stepping time per process")
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "MARKER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), args.seconds)
        return
    if shutil.which("strace") is None:
        print("syscalls.py needs strace", file=sys.stderr)
        raise SystemExit(2)
    script = [sys.executable, str(Path(__file__).resolve()), "--seconds", str(args.seconds)]
    results: dict[str, tuple[dict[str, int], int]] = {}
    with tempfile.TemporaryDirectory(prefix="xlaprof-syscalls-") as tmp:
        for variant in VARIANTS:
            marker = Path(tmp) / f"{variant}.pid"
            command = [*script, "--child", args.workload, str(marker)]
            if variant == "xlaprof":
                out = str(Path(tmp) / "runs")
                command = [sys.executable, "-m", "xlaprof", "run", "--out", out, "--", *command]
            env = {**os.environ, **STEADY_ENV}
            if variant == "bare + level 2":
                env.update(PT_XLA_DEBUG_LEVEL="2", PT_XLA_DEBUG_FILE=str(Path(tmp) / "debug.log"))
            results[variant] = trace(command, marker, args.seconds, env)
    names = sorted({n for calls, _ in results.values() for n in calls})
    print(f"System calls per steady step of the stepping thread ({args.workload} workload):")
    print(f"  {'call':16s}" + "".join(f" {v:>15s}" for v in VARIANTS))
    for name in [*names, "total"]:
        row = ""
        for variant in VARIANTS:
            calls, steps = results[variant]
            count = sum(calls.values()) if name == "total" else calls.get(name, 0)
            row += f" {count / max(steps, 1):15.2f}"
        print(f"  {name:16s}{row}")
    steps = ", ".join(f"{v} {results[v][1]}" for v in VARIANTS)
    print(f"  (steps while traced: {steps})")


if __name__ == "__main__":
    main()
