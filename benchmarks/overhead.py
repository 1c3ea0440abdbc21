"""Overhead of profiling: `xlaprof run` vs a bare run, and the per-call cost of `region`.

Run: python benchmarks/overhead.py   (needs the runtime extra; PJRT_DEVICE=CPU is set here)

Reported as ratios measured in this one run, because absolute times on a shared 2-core machine
are noisy. Runs alternate (bare, profiled, bare, profiled, ...) so drift hits both equally.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOOP = HERE / "steady_loop.py"
REPEATS = 3
WORKLOADS = {"small (4x256 MLP)": ["--width", "256"], "larger (4x1024 MLP)": ["--width", "1024"]}


def _loop(prefix: list[str], extra: list[str], env: dict[str, str]) -> float:
    out = subprocess.run(
        [*prefix, sys.executable, str(LOOP), *extra],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])["median_s"]


def step_overhead() -> dict[str, dict[str, float]]:
    """Bare vs `xlaprof run` (default: graphs kept) vs `xlaprof run --no-graphs`, alternating."""
    env = {**os.environ, "PJRT_DEVICE": "CPU"}
    results = {}
    for label, extra in WORKLOADS.items():
        times: dict[str, list[float]] = {"bare": [], "run": [], "run --no-graphs": []}
        with tempfile.TemporaryDirectory() as tmp:
            for index in range(REPEATS):
                times["bare"].append(_loop([], extra, env))
                for name, options in (("run", []), ("run --no-graphs", ["--no-graphs"])):
                    out = f"{tmp}/{name.replace(' ', '')}{index}"
                    run = [sys.executable, "-m", "xlaprof", "run", "-q", *options, "--out", out]
                    times[name].append(_loop([*run, "--"], extra, env))
        bare = statistics.median(times["bare"])
        results[label] = {
            "bare_median_ms": bare * 1e3,
            "xlaprof_run_median_ms": statistics.median(times["run"]) * 1e3,
            "ratio": statistics.median(times["run"]) / bare,
            "no_graphs_median_ms": statistics.median(times["run --no-graphs"]) * 1e3,
            "no_graphs_ratio": statistics.median(times["run --no-graphs"]) / bare,
        }
    return results


REGION_CODE = r"""
import json, tempfile, timeit
import torch_xla, torch_xla.debug.profiler as xp
import xlaprof
from xlaprof.capture import annotate

N = 200_000
def per_call(stmt):
    best = min(timeit.repeat(stmt, number=N, repeat=5, globals=globals()))
    return best / N * 1e9

class Nothing:
    def __enter__(self): return self
    def __exit__(self, *a): pass

results = {}
results["no annotation (empty with)"] = per_call("with Nothing(): pass")
results["xlaprof.region, profiling off"] = per_call("with xlaprof.region('r'): pass")
results["bare xp.Trace"] = per_call("with xp.Trace('r'): pass")
with tempfile.TemporaryDirectory() as tmp, xlaprof.profile(out=tmp, debug_level=0):
    results["xlaprof.region, profiling on"] = per_call("with xlaprof.region('r'): pass")
print(json.dumps(results))
"""


def region_cost() -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", REGION_CODE],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PJRT_DEVICE": "CPU"},
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> dict[str, object]:
    steps = step_overhead()
    regions = region_cost()
    trace = regions["bare xp.Trace"]
    print("Steady-state step time, median after warm-up (xlaprof run / bare, same machine):")
    for label, row in steps.items():
        print(
            f"  {label:22s} bare {row['bare_median_ms']:7.3f} ms   xlaprof run "
            f"{row['xlaprof_run_median_ms']:7.3f} ms (ratio {row['ratio']:.3f})   --no-graphs "
            f"{row['no_graphs_median_ms']:7.3f} ms (ratio {row['no_graphs_ratio']:.3f})"
        )
    print("Per-call cost of a region (ns; ratio to a bare xp.Trace):")
    for label, ns in regions.items():
        print(f"  {label:34s} {ns:8.0f} ns   {ns / trace:6.3f}x xp.Trace")
    return {"step_overhead": steps, "region_ns": regions}


if __name__ == "__main__":
    main()
