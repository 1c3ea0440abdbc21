"""Pod-scale trace analysis: wall time and peak RSS of `xlaprof analyze` on N hosts.

Run: python benchmarks/pod_scale.py [--hosts 4 32 128] [--events N] [--workers W] [--nice 10]

One real CPU capture (sample_traces/runs/recompile_varying_batch) is repeated to >= N events
(``trace_load.synthesize``); each pod is a logdir of N symbolic links to that one file, named
host-000 ... host-NNN, so every host is a full-size capture and disk use stays small (the
per-host Parquet caches are written beside the links). Each pod size runs `xlaprof analyze
LOGDIR --json` in a fresh process, with fresh caches. Reported: wall time, events per second,
seconds per million events (flat = time linear in the event count), the parent's peak RSS
(``ru_maxrss`` of the process running the CLI), and the workers' (each worker reports its own
``ru_maxrss``; the largest is shown, and ``RUSAGE_CHILDREN`` as a cross-check).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def measure(logdir: Path, workers: int | None) -> dict[str, float]:
    """Run the CLI in this process; return its figures (called in a fresh subprocess)."""
    from xlaprof.cli import main

    output = logdir / "analysis.json"
    args = ["analyze", str(logdir), "--json", "-o", str(output), "--force"]
    if workers:
        args += ["--workers", str(workers)]
    started = time.perf_counter()
    try:
        main(args, standalone_mode=False)
    except SystemExit as stop:  # pragma: no cover - the CLI exits on errors only
        if stop.code:
            raise
    seconds = time.perf_counter() - started
    document = json.loads(output.read_text())
    pod = document["trace"].get("pod") or {}
    hosts = pod.get("hosts", [])
    return {
        "seconds": seconds,
        "hosts": len(hosts),
        "events": sum(h["events"] for h in hosts),
        "errors": len(pod.get("errors", [])),
        "workers": pod.get("workers"),
        "parent_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_peak_rss_mb": max((h["worker_peak_rss_mb"] for h in hosts), default=0.0),
        "children_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "host_seconds_median": sorted(h["seconds"] for h in hosts)[len(hosts) // 2]
        if hosts
        else 0.0,
        "stragglers_rows": len(document.get("stragglers") or []),
    }


def make_pod(root: Path, capture: Path, hosts: int) -> Path:
    session = root / f"pod-{hosts}" / "plugins" / "profile" / "session"
    session.mkdir(parents=True)
    for i in range(hosts):
        (session / f"host-{i:03d}.xplane.pb").symlink_to(capture)
    return root / f"pod-{hosts}"


def main() -> dict[str, object]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, nargs="+", default=[4, 32, 128])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--nice", type=int, default=0, help="run the measured CLI under nice")
    parser.add_argument("--measure", metavar="LOGDIR")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(Path(args.measure), args.workers)))
        return {}
    from trace_load import synthesize

    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="xlaprof-pod-") as tmp:
        root = Path(tmp)
        capture = root / "capture" / "synthetic.xplane.pb"
        capture.parent.mkdir()
        events = synthesize(capture, args.events)
        size_mb = capture.stat().st_size / 1e6
        print(f"one host: {events:,} events, {size_mb:.0f} MB (links to one real-capture copy)")
        env = {**os.environ, "XLAPROF_LAZY_BYTES": "0"}  # every pod size takes the pod path
        for hosts in args.hosts:
            logdir = make_pod(root, capture, hosts)
            command = [sys.executable, __file__, "--measure", str(logdir)]
            if args.workers:
                command += ["--workers", str(args.workers)]
            if args.nice:
                command = ["nice", "-n", str(args.nice), *command]
            output = subprocess.run(command, capture_output=True, text=True, env=env)
            if output.returncode:
                print(output.stderr[-2000:])
                raise SystemExit(f"pod of {hosts} hosts failed")
            row = json.loads(output.stdout.strip().splitlines()[-1])
            row["seconds_per_million_events"] = row["seconds"] / (row["events"] / 1e6)
            results[str(hosts)] = row
            print(
                f"  {hosts:4d} hosts {row['events'] / 1e6:7.1f} M events  "
                f"{row['seconds']:8.1f} s  {row['events'] / row['seconds']:>9,.0f} events/s  "
                f"{row['seconds_per_million_events']:5.2f} s/M events  "
                f"parent {row['parent_peak_rss_mb']:6.0f} MB  "
                f"worker max {row['worker_peak_rss_mb']:6.0f} MB "
                f"(children {row['children_peak_rss_mb']:.0f} MB)  workers {row['workers']}",
                flush=True,
            )
            for cache in logdir.rglob("*.xlaprof.parquet"):
                cache.unlink()  # keep disk use to one pod's caches at a time
    sizes = [str(h) for h in args.hosts]
    if len(sizes) > 1:
        small, large = results[sizes[0]], results[sizes[-1]]
        for who in ("parent", "worker"):
            ratio = large[f"{who}_peak_rss_mb"] / small[f"{who}_peak_rss_mb"]
            print(f"  {who} peak RSS {sizes[-1]} hosts / {sizes[0]} hosts: {ratio:.2f} (<= 1.5)")
        per_event = large["seconds_per_million_events"] / small["seconds_per_million_events"]
        print(
            f"  time per event {sizes[-1]} hosts / {sizes[0]} hosts: {per_event:.2f} (~1: linear)"
        )
    return results


if __name__ == "__main__":
    main()
