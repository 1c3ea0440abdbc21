"""xlaprof against xprof-rs (the Rust rewrite of XProf's backend), side by side in one run.

Run: python benchmarks/vs_xprof_rs.py [--sizes MB ...] [--repeats R] [--warm N] [--cpu C]
                                      [--keep DIR] [--tasks decode answer]

xprof-rs is a benchmark dependency (``pip install 'xlaprof[bench]'``, or ``pip install
xprof-rs``: its wheel puts an ``xprof-rs`` command next to Python). Two tasks:

- ``decode``, every event decoded: ``len(xlaprof.load_trace(f).events)`` in a warm interpreter
  (a child process that loaded a small capture and then ``f`` once, untimed; the best of
  ``--warm`` timed loads; CPU by ``time.process_time``) against ``xprof-rs
  aggregate_xplane_events f`` as a whole process (it reads and aggregates every event);
- ``answer``, what a user asks for: ``xlaprof analyze f --json`` against ``xprof-rs
  get_overview SESSION`` (its overview page), both whole processes, imports included. xprof-rs
  takes a session folder: each capture is linked alone into one (``plugins/profile/run/``).

Captures: the real TPU capture of ``../shared/traces`` (xprof_tpu_inference_2_v1, 0.9 MB, 26,723
events) and hosts synthesized to about ``--sizes`` megabytes each (default 16, 80 and 120) by
``trace_load.synthesize``: the events of a real CPU capture (sample_traces/runs/
recompile_varying_batch, made by torch_xla's profiler) repeated with shifted timestamps, its
planes, metadata and stats as they are. They are written to ``--keep`` (kept for the next run)
or a temporary folder.

Every process runs pinned to one CPU (``taskset -c --cpu``; the machine's other core takes its
other load); the tools alternate (xlaprof first on even repeats, xprof-rs on odd), ``--repeats``
pairs per task and capture, medians reported. CPU seconds are user + system of the child
(``os.wait4``; the warm decode's own ``process_time``), peak memory its ``ru_maxrss``
(the warm decode's is that process's high-water mark, imports and warm-up included). Printed:
per task and capture, each tool's CPU and wall seconds, events/s and MB/s of CPU, peak MiB,
each run's user and system seconds (the system part is mostly first touches of memory, and
moves with what the kernel has free: a tool that takes huge pages pays for compacting memory
when there are none), and the ratios xlaprof / xprof-rs; the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
REAL = REPO.parent / "shared" / "traces" / "xprof_tpu_inference_2_v1.xplane.pb"
WARM_UP = next(REPO.glob("sample_traces/runs/healthy_loop/*/plugins/profile/*/*.xplane.pb"))
# Bytes an event of the synthesized host takes (recompile_varying_batch's, stats included).
BYTES_PER_EVENT = 21.8


def xprof_rs() -> str:
    """The ``xprof-rs`` command: beside this Python, else on PATH."""
    beside = Path(sys.executable).with_name("xprof-rs")
    found = str(beside) if beside.exists() else shutil.which("xprof-rs")
    if not found:
        sys.exit("xprof-rs is not installed: pip install xprof-rs (or 'xlaprof[bench]')")
    return found


def captures(sizes: list[float], folder: Path) -> list[Path]:
    """The real capture, then one synthesized host per size (made once, kept in ``folder``)."""
    found = [REAL] if REAL.exists() else []
    for size in sizes:
        path = folder / f"host_{size:g}mb.xplane.pb"
        if not path.exists():
            started = time.perf_counter()
            # In a child: this process stays small (a child's ru_maxrss starts at the size of
            # the process it was forked from).
            made = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--synthesize",
                    str(path),
                    str(int(size * 1e6 / BYTES_PER_EVENT)),
                ],
                check=True,
                capture_output=True,
                text=True,
                cwd=REPO,
            )
            events = int(made.stdout.split()[-1])
            print(
                f"synthesized {path.name}: {events:,} events, {path.stat().st_size / 1e6:.1f} MB "
                f"in {time.perf_counter() - started:.0f} s",
                flush=True,
            )
        found.append(path)
    return found


def session_of(path: Path, folder: Path) -> Path:
    """A session folder holding only ``path`` (a link), as xprof-rs' get_overview takes."""
    session = folder / "sessions" / path.stem.replace(".", "_") / "plugins" / "profile" / "run"
    session.mkdir(parents=True, exist_ok=True)
    link = session / "host.xplane.pb"
    if not link.exists():
        link.symlink_to(path.resolve())
    return session


def run_process(command: list[str], cpu: int) -> dict[str, float]:
    """``command`` pinned to ``cpu``: its CPU seconds (user + system), wall seconds, peak RSS
    (MiB) and its standard output."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        # From the checkout's root, its package first: this checkout's xlaprof is measured.
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        child = subprocess.Popen(
            ["taskset", "-c", str(cpu), *command],
            stdout=out,
            stderr=subprocess.DEVNULL,
            cwd=REPO,
            env=env,
        )
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        out.seek(0)
        output = out.read()
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {child.returncode}: {output[-400:]!r}")
    return {
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "user_seconds": usage.ru_utime,
        "system_seconds": usage.ru_stime,
        "seconds": wall,
        "peak_mb": usage.ru_maxrss / 1024,
        "output": output,  # type: ignore[dict-item]
    }


def warm_decode(path: Path, times: int) -> dict[str, float]:
    """In this process: ``len(load_trace(path).events)`` after a warm-up, best of ``times``."""
    import xlaprof

    len(xlaprof.load_trace(WARM_UP).events)
    events = len(xlaprof.load_trace(path).events)  # untimed: first touches, lazy imports
    best = (float("inf"), float("inf"), 0.0, 0.0)
    for _ in range(times):
        start, cpu, at = time.perf_counter(), time.process_time(), os.times()
        len(xlaprof.load_trace(path).events)
        now = os.times()
        best = min(
            best,
            (
                time.process_time() - cpu,
                time.perf_counter() - start,
                now.user - at.user,
                now.system - at.system,
            ),
        )
    peak = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
    return {
        "cpu_seconds": best[0],
        "seconds": best[1],
        "user_seconds": best[2],
        "system_seconds": best[3],
        "events": events,
        "peak_mb": peak,
    }


def measure(task: str, tool: str, path: Path, folder: Path, cpu: int, warm: int) -> dict[str, Any]:
    """One run of ``tool`` on ``task``."""
    if tool == "xlaprof" and task == "decode":
        command = [sys.executable, __file__, "--warm-decode", str(path), "--warm", str(warm)]
        found = run_process(command, cpu)
        result: dict[str, Any] = json.loads(found.pop("output").decode().strip().splitlines()[-1])
        return result
    if tool == "xlaprof":
        command = [sys.executable, "-m", "xlaprof", "analyze", str(path), "--json"]
        found = run_process(command, cpu)
        document = json.loads(found.pop("output"))
        found["findings"] = len(document.get("findings", []))
        return found
    if task == "decode":
        found = run_process([xprof_rs(), "aggregate_xplane_events", str(path)], cpu)
        found["events"] = json.loads(found.pop("output"))["events_scanned"]
        return found
    try:
        found = run_process([xprof_rs(), "get_overview", str(session_of(path, folder))], cpu)
    except RuntimeError as error:  # (on the real TPU capture: "No overview data returned")
        return {"failed": str(error)[-120:]}
    json.loads(found.pop("output"))  # an overview, not an error
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=float, nargs="*", default=[16, 80, 120])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--cpu", type=int, default=(os.cpu_count() or 1) - 1)
    parser.add_argument("--keep", type=Path, help="a folder to keep the synthesized captures in")
    parser.add_argument("--tasks", nargs="+", default=["decode", "answer"])
    parser.add_argument("--warm-decode", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--synthesize", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.synthesize:
        sys.path.insert(0, str(HERE))
        from trace_load import synthesize

        print(synthesize(Path(args.synthesize[0]), int(args.synthesize[1])))
        return
    if args.warm_decode:
        print(json.dumps(warm_decode(args.warm_decode, args.warm)))
        return
    # Bytecode for the checkout, as an install has it (where PYTHONDONTWRITEBYTECODE is set, a
    # checkout's modules would otherwise be compiled again by every process measured).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "xlaprof")], check=True)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="vs-xprof-rs-"))
    folder.mkdir(parents=True, exist_ok=True)
    paths = captures(args.sizes, folder)
    loads = [os.getloadavg()]
    print(f"xprof-rs: {xprof_rs()}; one core each (taskset -c {args.cpu}); load {loads[0]}")
    for task in args.tasks:
        for path in paths:
            runs: dict[str, list[dict[str, Any]]] = {"xlaprof": [], "xprof-rs": []}
            for repeat in range(args.repeats):
                order = ["xlaprof", "xprof-rs"] if repeat % 2 == 0 else ["xprof-rs", "xlaprof"]
                for tool in order:
                    runs[tool].append(measure(task, tool, path, folder, args.cpu, args.warm))
            report(task, path, runs)
    loads.append(os.getloadavg())
    print(f"load average (1, 5, 15 min) before {loads[0]}, after {loads[-1]}")


def report(task: str, path: Path, runs: dict[str, list[dict[str, Any]]]) -> None:
    """One task on one capture: medians per tool, and xlaprof / xprof-rs."""
    size = path.stat().st_size / 1e6
    events = next((r["events"] for r in runs["xlaprof"] + runs["xprof-rs"] if "events" in r), None)
    what = "decode every event" if task == "decode" else "the answer"
    counted = f", {events:,} events" if events else ""
    print(f"\n{what}: {path.name} ({size:.1f} MB{counted})")
    median: dict[str, dict[str, float]] = {}
    for tool, found in runs.items():
        if any("failed" in r for r in found):
            print(f"  {tool:9s} failed: {next(r['failed'] for r in found if 'failed' in r)}")
            return
        median[tool] = {
            key: statistics.median(r[key] for r in found)
            for key in ("cpu_seconds", "seconds", "peak_mb", "user_seconds", "system_seconds")
        }
        m = median[tool]
        rate = f"{events / m['cpu_seconds'] / 1e6:6.2f} M events/s" if events else ""
        each = ", ".join(f"{r['cpu_seconds']:.3f}" for r in found)
        print(
            f"  {tool:9s} CPU {m['cpu_seconds']:7.3f} s (runs: {each})  wall {m['seconds']:7.3f} s"
            f"  {rate}  {size / m['cpu_seconds']:7.1f} MB/s  peak {m['peak_mb']:7.0f} MiB"
        )
        users = ", ".join(f"{r['user_seconds']:.2f}" for r in found)
        systems = ", ".join(f"{r['system_seconds']:.2f}" for r in found)
        print(f"  {'':9s}   user (runs: {users}), system (runs: {systems})")
    ours, theirs = median["xlaprof"], median["xprof-rs"]
    print(
        f"  xlaprof / xprof-rs: CPU {ours['cpu_seconds'] / theirs['cpu_seconds']:.2f}x, "
        f"peak memory {ours['peak_mb'] / theirs['peak_mb']:.2f}x"
    )
    if task == "decode":  # xprof-rs counts what it scanned (it stops at 5,000,001 events)
        counts = {tool: sorted({r["events"] for r in found}) for tool, found in runs.items()}
        print(f"  events: xlaprof {counts['xlaprof']}, xprof-rs scanned {counts['xprof-rs']}")


if __name__ == "__main__":
    main()
