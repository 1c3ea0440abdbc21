"""Trace loading speed: xlaprof.load_trace vs XProf's own conversion, on >= 1M events.

Run: python benchmarks/trace_load.py [--events N] [--path FILE] [--methods ...] [--repeats R]
                                     [--before DIR] [--warm N]

The input is synthesized by repeating the events of a real CPU capture
(sample_traces/runs/recompile_varying_batch) with shifted timestamps until it holds N events
(or ``--path``, any capture). Methods:

- ``xlaprof``: ``xlaprof.load_trace`` of the file, then ``.events`` (decode, step numbers, the
  device model);
- ``decode``: ``xspace_frame`` of the file alone (the XSpace decode, ``args`` included, as
  decoded on demand: no dict made);
- ``pod-worker``: what a pod's worker does for one host (``inputs.pod.summary.summarize_capture``:
  decode without ``args``, step numbers, device model, per-step tables and aggregates, and the
  Parquet cache written, into a fresh folder);
- ``xprof``: the path a user would otherwise take, XProf's trace_viewer conversion
  (xspace_to_tool_data(..., "trace_viewer")), json.loads, and a pandas DataFrame of the
  complete events.

Each method runs in its own fresh process (alternating, ``--repeats`` times) so peak memory (max
RSS) is its own; it loads a small capture first, so imports are not timed. Reported: the median
and the best of wall time and of the process's CPU time (user and system; what the machine's
other load disturbs least), events per second of each, and the load average. ``--before DIR``
runs the xlaprof methods a second time with another checkout's package first on the path
(``git worktree add DIR REV``), alternating with this one's, for a before/after ratio on the
same machine at the same time. ``--warm N``: each process loads the file once untimed, then
times N more loads and keeps the best: a warm interpreter's figure (first calls, lazy imports
and a cold allocator left out), as issue 40 measures it.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "sample_traces" / "runs" / "recompile_varying_batch"
REPEATS = 3


def synthesize(path: Path, target: int) -> int:
    """Write an XSpace of at least ``target`` events made of copies of a real capture."""
    from xlaprof.parse.xplane.schema import read_xspace

    (source,) = SOURCE.glob("*/plugins/profile/*/*.xplane.pb")
    space = read_xspace(source)
    per_copy = sum(len(line.events) for plane in space.planes for line in plane.lines)
    copies = -(-target // per_copy)
    for plane in space.planes:
        for line in plane.lines:
            originals = list(line.events)
            if not originals:
                continue
            span = max(e.offset_ps + e.duration_ps for e in originals) + 1
            for copy in range(1, copies):
                shift = copy * span
                for event in originals:
                    added = line.events.add(
                        metadata_id=event.metadata_id,
                        offset_ps=event.offset_ps + shift,
                        duration_ps=event.duration_ps,
                    )
                    if event.stats:
                        added.stats.extend(event.stats)
    path.write_bytes(space.SerializeToString())
    return per_copy * copies


def measure(method: str, path: Path, best_of: int = 0) -> dict[str, float]:
    import os

    if method != "xprof":  # imports and first calls outside the timing
        from xlaprof.inputs.traces import load_trace

        warm = next(HERE.parent.glob("sample_traces/runs/healthy_loop/*/plugins/*/*/*.xplane.pb"))
        load_trace(warm)
    cache = tempfile.mkdtemp(prefix="xlaprof-cache-")
    os.environ["XLAPROF_CACHE_DIR"] = cache  # the pod worker's cache goes to a fresh folder
    if method == "pod-worker":
        try:
            from xlaprof.inputs.pod.summary import summarize_capture
        except ImportError:  # a checkout before the worker was renamed (--before)
            from xlaprof.inputs.pod.summary import (
                summarize_host as summarize_capture,
            )

        summarize_capture(warm)
    if method == "decode":
        from xlaprof.parse.xplane import xspace_frame

        xspace_frame(warm)
    if best_of and method != "xprof":
        return _warm(method, path, best_of)
    start, cpu = time.perf_counter(), time.process_time()
    if method == "xlaprof":
        events = len(load_trace(path).events)
    elif method == "pod-worker":
        events = summarize_capture(path).events
    elif method == "decode":
        events = len(xspace_frame(path))
    else:
        import pandas as pd
        from xprof.convert.raw_to_tool_data import xspace_to_tool_data

        data, _content_type = xspace_to_tool_data(
            [str(path)], "trace_viewer", {"use_saved_result": False}
        )
        document = json.loads(data)
        frame = pd.DataFrame([e for e in document["traceEvents"] if e.get("ph") == "X"])
        events = len(frame)
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    import shutil

    shutil.rmtree(cache, ignore_errors=True)
    return {"seconds": seconds, "cpu_seconds": cpu, "events": events, "peak_rss_mb": peak_mb}


def _warm(method: str, path: Path, times: int) -> dict[str, float]:
    """``measure`` in a warm process: one load of ``path`` untimed, then the best of ``times``
    (a pod worker's cache each time in a fresh folder: no call reads another's)."""
    import os

    def once() -> int:
        if method == "xlaprof":
            from xlaprof.inputs.traces import load_trace

            return len(load_trace(path).events)
        if method == "decode":
            from xlaprof.parse.xplane import xspace_frame

            return len(xspace_frame(path))
        from xlaprof.inputs.pod.summary import summarize_capture

        os.environ["XLAPROF_CACHE_DIR"] = tempfile.mkdtemp(prefix="xlaprof-cache-")
        return int(summarize_capture(path).events)

    events = once()
    best = (float("inf"), float("inf"))
    for _ in range(times):
        start, cpu = time.perf_counter(), time.process_time()
        once()
        best = min(best, (time.process_time() - cpu, time.perf_counter() - start))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": best[1], "cpu_seconds": best[0], "events": events, "peak_rss_mb": peak_mb}


def _run(method: str, path: Path, code: Path | None = None, warm: int = 0) -> dict[str, float]:
    import os

    env = dict(os.environ)
    if code is not None:  # another checkout's package first on the path
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    output = subprocess.run(
        [sys.executable, __file__, "--measure", method, str(path), "--warm", str(warm)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> dict[str, dict[str, float]]:
    import os

    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--path", type=Path, help="a capture to load instead of a synthetic one")
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["xlaprof", "xprof"],
        choices=["xlaprof", "decode", "pod-worker", "xprof"],
    )
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--before", type=Path, help="another checkout to compare with")
    parser.add_argument("--measure", nargs=2, metavar=("METHOD", "PATH"))
    parser.add_argument(
        "--warm", type=int, default=0, help="time N loads in each warm process, keep the best"
    )
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure[0], Path(args.measure[1]), args.warm)))
        return {}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        if args.path:
            path = args.path.resolve()
        else:
            path = Path(tmp) / "plugins" / "profile" / "bench" / "synthetic.xplane.pb"
            path.parent.mkdir(parents=True)
            started = time.perf_counter()
            events = synthesize(path, args.events)
            print(
                f"synthesized {events:,} events ({path.stat().st_size / 1e6:.0f} MB) in "
                f"{time.perf_counter() - started:.0f} s"
            )
        runs: dict[str, list[dict[str, float]]] = {}
        for _ in range(args.repeats):
            for method in args.methods:
                runs.setdefault(method, []).append(_run(method, path, warm=args.warm))
                if args.before and method != "xprof":
                    runs.setdefault(f"{method} (before)", []).append(
                        _run(method, path, args.before.resolve(), args.warm)
                    )
                loads.append(os.getloadavg()[0])
    result: dict[str, dict[str, float]] = {}
    print(f"load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
    if args.warm:
        print(f"each process warm: the best of {args.warm} loads after one untimed")
    for method, rows in runs.items():
        events = int(rows[0]["events"])
        wall = statistics.median(r["seconds"] for r in rows)
        cpu = statistics.median(r["cpu_seconds"] for r in rows)
        best_wall = min(r["seconds"] for r in rows)
        best_cpu = min(r["cpu_seconds"] for r in rows)
        peak = max(r["peak_rss_mb"] for r in rows)
        result[method] = {
            "median_seconds": wall,
            "best_seconds": best_wall,
            "median_cpu_seconds": cpu,
            "best_cpu_seconds": best_cpu,
            "events": events,
            "events_per_second": events / wall,
            "peak_rss_mb": peak,
        }
        print(
            f"  {method:20s} {events:>9,} events  wall {wall:6.2f} s (best {best_wall:5.2f}) "
            f"{events / wall / 1e6:5.2f} M/s (best {events / best_wall / 1e6:4.2f})  "
            f"cpu {cpu:5.2f} s {events / cpu / 1e6:5.2f} M/s (best {events / best_cpu / 1e6:4.2f})"
            f"  peak RSS {peak:,.0f} MB"
        )
    for method in args.methods:
        before, after = result.get(f"{method} (before)"), result.get(method)
        if before is not None and after is not None:
            wall_ratio = before["median_seconds"] / after["median_seconds"]
            cpu_ratio = before["median_cpu_seconds"] / after["median_cpu_seconds"]
            print(f"  {method}: before / after: wall {wall_ratio:.2f}x, cpu {cpu_ratio:.2f}x")
    if "xprof" in result and "xlaprof" in result:
        ratio = result["xlaprof"]["median_seconds"] / result["xprof"]["median_seconds"]
        print(f"  load time ratio xlaprof / XProf conversion: {ratio:.3f} (target <= 0.5)")
        result["ratio"] = {"xlaprof_over_xprof": ratio}
    return result


if __name__ == "__main__":
    main()
