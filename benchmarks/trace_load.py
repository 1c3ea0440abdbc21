"""Trace loading speed: xlaprof.load_trace vs XProf's own conversion, on >= 1M events.

Run: python benchmarks/trace_load.py [--events N]

The input is synthesized by repeating the events of a real CPU capture
(sample_traces/runs/recompile_varying_batch) with shifted timestamps until it holds N events.
The path a user would otherwise take is XProf's trace_viewer conversion
(xspace_to_tool_data(..., "trace_viewer")), json.loads, and a pandas DataFrame of the complete
events. Each method runs in its own fresh process (alternating, REPEATS times) so peak memory
(max RSS) is its own; times are the median.
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


def measure(method: str, path: Path) -> dict[str, float]:
    start = time.perf_counter()
    if method == "xlaprof":
        from xlaprof.inputs.traces import load_trace

        events = len(load_trace(path).events)
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
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "events": events, "peak_rss_mb": peak_mb}


def _run(method: str, path: Path) -> dict[str, float]:
    output = subprocess.run(
        [sys.executable, __file__, "--measure", method, str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> dict[str, object]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--measure", nargs=2, metavar=("METHOD", "PATH"))
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure[0], Path(args.measure[1]))))
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plugins" / "profile" / "bench" / "synthetic.xplane.pb"
        path.parent.mkdir(parents=True)
        started = time.perf_counter()
        events = synthesize(path, args.events)
        print(
            f"synthesized {events:,} events ({path.stat().st_size / 1e6:.0f} MB) in "
            f"{time.perf_counter() - started:.0f} s"
        )
        runs: dict[str, list[dict[str, float]]] = {"xlaprof": [], "xprof": []}
        for _ in range(REPEATS):
            for method in runs:
                runs[method].append(_run(method, path))
    result = {}
    for method, rows in runs.items():
        seconds = statistics.median(r["seconds"] for r in rows)
        result[method] = {
            "median_seconds": seconds,
            "events": rows[0]["events"],
            "events_per_second": rows[0]["events"] / seconds,
            "peak_rss_mb": max(r["peak_rss_mb"] for r in rows),
        }
        print(
            f"  {method:8s} {seconds:7.2f} s  {rows[0]['events']:>9,} events  "
            f"{rows[0]['events'] / seconds:>11,.0f} events/s  peak RSS "
            f"{result[method]['peak_rss_mb']:,.0f} MB"
        )
    ratio = result["xlaprof"]["median_seconds"] / result["xprof"]["median_seconds"]
    print(f"  load time ratio xlaprof / XProf conversion: {ratio:.3f} (target <= 0.5)")
    result["ratio"] = ratio
    return result


if __name__ == "__main__":
    main()
