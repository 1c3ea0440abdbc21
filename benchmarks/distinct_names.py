"""Many distinct op names: ``xlaprof analyze`` on N events of N names vs N events of 100 names.

Run: python benchmarks/distinct_names.py [--events N]   (default 1,000,000)

A capture someone sent can give every event a name of its own (issue 31: 1M distinct names took
103 s against 6 s). Per-op work done with a Python function per group (``groupby.agg`` with a
lambda) made the cost grow with the number of names; this measures that it no longer does much:
the ratio of wall times (distinct / repeated) in fresh processes, same event count, console and
``--json`` output. The input is a Kineto-style Chrome trace (one GPU, one host thread with
``ProfilerStep#N`` ranges) written here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPEATS = 3


def write_trace(path: Path, events: int, names: int | None) -> None:
    """A trace of ``events`` GPU kernels named ``op_<i>`` (``i % names`` when given)."""
    rows: list[dict] = [
        {"ph": "M", "name": "process_labels", "pid": 0, "args": {"labels": "GPU 0"}},
        {"ph": "M", "name": "process_name", "pid": 9, "args": {"name": "host"}},
    ]
    for i in range(events):
        name = f"op_{i if names is None else i % names}"
        rows.append({"ph": "X", "name": name, "pid": 0, "tid": 7, "ts": 1000.0 + 2 * i, "dur": 1.0})
    for step in range(4):
        start = 1000.0 + step * events / 2
        rows.append(
            {"ph": "X", "name": f"ProfilerStep#{step}", "pid": 9, "tid": 1, "ts": start,
             "dur": events / 2}
        )  # fmt: skip
    path.write_text(json.dumps({"traceEvents": rows}))


def wall(path: Path, *options: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "xlaprof", "analyze", str(path), *options],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        distinct = Path(folder) / "distinct.trace.json"
        repeated = Path(folder) / "repeated.trace.json"
        write_trace(distinct, args.events, None)
        write_trace(repeated, args.events, 100)
        result = {"events": args.events}
        for label, options in (("console", ()), ("json", ("--json",))):
            times = {"distinct": [], "repeated": []}
            for _ in range(REPEATS):  # alternating, so load on the machine hits both alike
                times["distinct"].append(wall(distinct, *options))
                times["repeated"].append(wall(repeated, *options))
            medians = {k: statistics.median(v) for k, v in times.items()}
            result[label] = {
                "distinct_s": round(medians["distinct"], 2),
                "repeated_s": round(medians["repeated"], 2),
                "ratio": round(medians["distinct"] / medians["repeated"], 2),
            }
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
