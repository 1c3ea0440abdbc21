"""Pod-scale trace analysis: wall time and peak RSS of `xlaprof analyze` on N hosts.

Run: python benchmarks/pod_scale.py [--hosts 4 32 128] [--events N] [--workers W] [--nice 10]
     python benchmarks/pod_scale.py --jax-steps 9000 [--hosts 4 32 128]   # many short steps
     python benchmarks/pod_scale.py --capture PATH.xplane.pb [--hosts ...]
     python benchmarks/pod_scale.py --parent FEW.xplane.pb MANY.xplane.pb [--hosts 4]
         [--repeat 3] [--before DIR]   # the parent alone, warm caches, at two step counts

The host capture is one of: a real CPU capture (sample_traces/runs/recompile_varying_batch)
repeated to >= N events (``trace_load.synthesize``; few, long steps), a JAX-on-CPU training
capture of ``--jax-steps`` short steps made here (``jax_capture``: JAX from the package registry,
``pip install jax``; thousands of steps a host, where per-step rows outgrow the events), or any
``--capture``. Each pod is a logdir of N symbolic links to that one file, named host-000 ...
host-NNN, so every host is a full-size capture and disk use stays small (the per-host Parquet
caches and per-step tables are written beside the links). Each pod size runs `xlaprof analyze
LOGDIR --json` in a fresh process, with fresh caches. Reported: wall time, events per second,
seconds per million events (flat = time linear in the event count), the parent's peak RSS
(``ru_maxrss`` of the process running the CLI), and the workers' (each worker reports its own
``ru_maxrss``; the largest is shown, and ``RUSAGE_CHILDREN`` as a cross-check), the size of
the ``--json`` document, and the load average while it ran (the machine may be shared).

``--parent FEW MANY`` times the parent alone: a pod of ``--hosts`` links to each of two
captures of the same program at two step counts (say 4,500 and 45,000 steps), its caches made
by one run first, then ``--repeat`` runs each in fresh processes, alternating, on warm caches
(the workers only check their caches). Reported per pod: the best wall time and the parent
process's CPU seconds (user + system, its own ``getrusage``; the workers' apart), peak RSS and
``--json`` size, and the ratio MANY / FEW of each: a parent whose work does not grow with
steps has CPU ratios near 1 where the step counts differ 10x. ``--before DIR`` runs another
checkout in the same alternation, on pods and caches of its own (its cache version may differ;
its ratio, and after / before).
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
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = output.read_text()
    document = json.loads(text)
    pod = document["trace"].get("pod") or {}
    hosts = pod.get("hosts", [])
    return {
        "seconds": seconds,
        "parent_cpu_s": own.ru_utime + own.ru_stime,
        "workers_cpu_s": children.ru_utime + children.ru_stime,
        "steps": (document.get("story") or {}).get("steps") or 0,
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
        "stragglers_rows": document.get("stragglers_total") or 0,
        "json_bytes": len(text.encode()),
        "load_average": os.getloadavg()[0],
    }


# A JAX training loop on CPU, profiled: a jitted step per iteration, each inside a
# StepTraceAnnotation (JAX's step marker, numbered from 0), Python tracing off.
JAX_SCRIPT = """
import sys
import jax
import jax.numpy as jnp

logdir, steps = sys.argv[1], int(sys.argv[2])
step = jax.jit(lambda x: jnp.tanh(x @ x.T).sum())
x = jnp.ones((16, 16))
options = jax.profiler.ProfileOptions()
options.python_tracer_level = 0
with jax.profiler.trace(logdir, profiler_options=options):
    for number in range(steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=number):
            step(x).block_until_ready()
"""


def jax_capture(root: Path, steps: int) -> Path:
    """A JAX-on-CPU capture of ``steps`` steps (its ``.xplane.pb``), made in a subprocess."""
    logdir = root / "jax-logdir"
    subprocess.run(
        [sys.executable, "-c", JAX_SCRIPT, str(logdir), str(steps)],
        check=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    (capture,) = logdir.glob("plugins/profile/*/*.xplane.pb")
    return capture


def make_pod(root: Path, capture: Path, hosts: int) -> Path:
    session = root / f"pod-{hosts}" / "plugins" / "profile" / "session"
    session.mkdir(parents=True)
    for i in range(hosts):
        (session / f"host-{i:03d}.xplane.pb").symlink_to(capture)
    return root / f"pod-{hosts}"


def _pod(
    logdir: Path, hosts: int, args: argparse.Namespace, env: dict[str, str], code: Path | None
) -> dict[str, float]:
    """One pod's figures, from a fresh process (``code``: another checkout's package first)."""
    command = [sys.executable, __file__, "--measure", str(logdir)]
    if args.workers:
        command += ["--workers", str(args.workers)]
    if args.nice:
        command = ["nice", "-n", str(args.nice), *command]
    if code is not None:
        env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(code.resolve())]))}
    output = subprocess.run(command, capture_output=True, text=True, env=env)
    if output.returncode:
        print(output.stderr[-2000:])
        raise SystemExit(f"pod of {hosts} hosts failed")
    row: dict[str, float] = json.loads(output.stdout.strip().splitlines()[-1])
    row["seconds_per_million_events"] = row["seconds"] / (row["events"] / 1e6)
    return row


def _print(hosts: int, row: dict[str, float], label: str) -> None:
    print(
        f"  {hosts:4d} hosts {label:6s} {row['events'] / 1e6:7.1f} M events  "
        f"{row['seconds']:8.1f} s  {row['events'] / row['seconds']:>9,.0f} events/s  "
        f"{row['seconds_per_million_events']:5.2f} s/M events  "
        f"host median {row['host_seconds_median']:5.2f} s  "
        f"parent {row['parent_peak_rss_mb']:6.0f} MB  "
        f"worker max {row['worker_peak_rss_mb']:6.0f} MB "
        f"(children {row['children_peak_rss_mb']:.0f} MB)  workers {row['workers']}  "
        f"--json {row['json_bytes'] / 1e6:.1f} MB  "
        f"stragglers {row['stragglers_rows']:,} rows  load {row['load_average']:.1f}",
        flush=True,
    )


def parent_alone(args: argparse.Namespace, env: dict[str, str]) -> dict[str, object]:
    """The parent's figures on warm caches at two step counts (``--parent FEW MANY``), best of
    ``--repeat`` alternating fresh runs, with their MANY / FEW ratios (and another checkout's,
    ``--before``)."""
    few, many = (Path(p).resolve() for p in args.parent)
    codes: list[Path | None] = [None, args.before] if args.before else [None]
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="xlaprof-parent-") as tmp:
        # each checkout its own pods: caches of another cache version would be rebuilt
        pods: dict[tuple[Path | None, str], Path] = {}
        for code in codes:
            side = "before" if code else "after"
            for label, capture in (("few", few), ("many", many)):
                logdir = make_pod(Path(tmp) / side / label, capture, args.hosts[0])
                _pod(logdir, args.hosts[0], args, env, code)  # the caches, made once
                pods[(code, label)] = logdir
        best: dict[tuple[str, str], dict[str, float]] = {}
        for _ in range(args.repeat):
            for code in codes:
                for label in ("few", "many"):
                    row = _pod(pods[(code, label)], args.hosts[0], args, env, code)
                    key = ("before" if code else "after", label)
                    if key not in best or row["parent_cpu_s"] < best[key]["parent_cpu_s"]:
                        best[key] = row
        print(f"{args.hosts[0]} hosts, caches warm, best of {args.repeat} (by parent CPU):")
        for (side, label), row in sorted(best.items()):
            print(
                f"  {side:6s} {label:4s} {row['steps']:>7,} steps  wall {row['seconds']:6.2f} s  "
                f"parent CPU {row['parent_cpu_s']:6.2f} s  workers CPU "
                f"{row['workers_cpu_s']:5.2f} s  parent {row['parent_peak_rss_mb']:6.0f} MB  "
                f"--json {row['json_bytes'] / 1e6:6.1f} MB  load {row['load_average']:.1f}",
                flush=True,
            )
            results[f"{side} {label}"] = row
        for side in sorted({side for side, _ in best}):
            a, b = best[(side, "few")], best[(side, "many")]
            print(
                f"  {side}: many / few steps ({b['steps'] / max(a['steps'], 1):.0f}x): wall "
                f"{b['seconds'] / a['seconds']:.2f}, parent CPU "
                f"{b['parent_cpu_s'] / a['parent_cpu_s']:.2f}, RSS "
                f"{b['parent_peak_rss_mb'] / a['parent_peak_rss_mb']:.2f}, --json "
                f"{b['json_bytes'] / a['json_bytes']:.2f}"
            )
        if args.before:
            for label in ("few", "many"):
                a, b = best[("before", label)], best[("after", label)]
                print(
                    f"  {label}: after / before: parent CPU "
                    f"{b['parent_cpu_s'] / a['parent_cpu_s']:.2f}, RSS "
                    f"{b['parent_peak_rss_mb'] / a['parent_peak_rss_mb']:.2f}, --json "
                    f"{b['json_bytes'] / a['json_bytes']:.2f}"
                )
    return results


def main() -> dict[str, object]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, nargs="+", default=[4, 32, 128])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--nice", type=int, default=0, help="run the measured CLI under nice")
    parser.add_argument("--jax-steps", type=int, help="hosts: a JAX CPU capture of this many steps")
    parser.add_argument("--capture", type=Path, help="hosts: links to this capture")
    parser.add_argument("--before", type=Path, help="also run another checkout (git worktree)")
    parser.add_argument("--measure", metavar="LOGDIR")
    parser.add_argument(
        "--parent", nargs=2, metavar=("FEW", "MANY"), help="the parent alone at two step counts"
    )
    parser.add_argument("--repeat", type=int, default=3, help="--parent: runs of each pod")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(Path(args.measure), args.workers)))
        return {}
    if args.parent:
        if args.hosts == parser.get_default("hosts"):
            args.hosts = [4]
        return parent_alone(args, {**os.environ, "XLAPROF_LAZY_BYTES": "0"})
    from trace_load import synthesize

    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="xlaprof-pod-") as tmp:
        root = Path(tmp)
        if args.capture:
            capture = args.capture.resolve()
            what = "links to a given capture"
        elif args.jax_steps:
            capture = jax_capture(root, args.jax_steps)
            what = f"links to one JAX CPU capture of {args.jax_steps:,} steps"
        else:
            capture = root / "capture" / "synthetic.xplane.pb"
            capture.parent.mkdir()
            synthesize(capture, args.events)
            what = "links to one real-capture copy"
        size_mb = capture.stat().st_size / 1e6
        print(f"one host: {size_mb:.1f} MB ({what})")
        env = {**os.environ, "XLAPROF_LAZY_BYTES": "0"}  # every pod size takes the pod path
        for hosts in args.hosts:
            logdir = make_pod(root, capture, hosts)
            for code in [None, args.before] if args.before else [None]:
                row = _pod(logdir, hosts, args, env, code)
                results[str(hosts) + (" (before)" if code else "")] = row
                _print(hosts, row, "before" if code else "")
                for cache in logdir.rglob("*.xlaprof*.parquet"):
                    cache.unlink()  # keep disk use to one pod's caches at a time; fresh caches
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
