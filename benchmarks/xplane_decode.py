"""XSpace parse speed: ``xspace_frame`` before and after the numpy event decoder, 1M events.

Run: python benchmarks/xplane_decode.py [--events N] [--path FILE] [--before REV] [--check]

The input is the synthetic host of ``trace_load.py`` (copies of a real CPU capture, 21 MB for
1,001,925 events) unless ``--path`` names a capture. Methods:

- ``before``: ``xspace_frame`` of commit ``--before`` (default bd30631, the last with a Python
  loop over upb's messages), its ``xplane.py`` loaded from git as a module of its own;
- ``after``: today's ``xspace_frame`` (its ``args`` decoded on demand: no dict is made);
  ``after, args=False``: the same without the stats ``args`` keeps (what the pod cache keeps).

Each run is a fresh process (methods alternating, REPEATS times): it imports everything and
parses a small capture first, so that imports, lazy imports and schema building are not
timed, then times the call with ``time.process_time()`` (the process's CPU, user and system:
at a million events, first touching fresh memory is a good part of it). Peak RSS (VmHWM on
Linux, else ``ru_maxrss``) is read after the warm-up and after the parse. Times are medians;
the ratio is before / after within this run. ``--check`` also asserts, in one process, that
the frame equals the one the tests' reference decoder (``tests/xplane_reference.py``) makes from
upb's messages.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WARM_UP = next(REPO.glob("sample_traces/runs/healthy_loop/*/plugins/profile/*/*.xplane.pb"))
REPEATS = 3
METHODS = ("before", "after", "after, args=False")


def _before_module(rev: str) -> Any:
    """``xlaprof/parse/xplane.py`` as of ``rev``, imported under another name."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{rev}:xlaprof/parse/xplane.py"],
        capture_output=True,
        check=True,
    ).stdout
    folder = Path(tempfile.mkdtemp())
    (folder / "xplane_before.py").write_bytes(source)
    spec = importlib.util.spec_from_file_location("xplane_before", folder / "xplane_before.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def _peak_rss_mb() -> float:
    """This process's peak RSS. Linux: VmHWM, the high-water mark of this program's memory
    (``ru_maxrss`` of a child starts at its parent's size when spawned: the parent holds the
    synthesized capture); elsewhere ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def measure(method: str, path: Path, rev: str) -> dict[str, float]:
    """One timed parse in this (fresh) process."""
    import numpy  # noqa: F401
    import pandas  # noqa: F401

    if method == "before":
        parse = _before_module(rev).xspace_frame
    else:
        from xlaprof.parse.xplane import xspace_frame

        def parse(p: Path) -> Any:
            return xspace_frame(p, args=method == "after")

    parse(WARM_UP)
    warm_rss = _peak_rss_mb()
    started = time.process_time()
    frame = parse(path)
    cpu = time.process_time() - started
    peak_rss = _peak_rss_mb()
    return {"cpu_s": cpu, "events": len(frame), "rss_warm_mb": warm_rss, "rss_peak_mb": peak_rss}


def _run(method: str, path: Path, rev: str) -> dict[str, float]:
    output = subprocess.run(
        [sys.executable, __file__, "--measure", method, str(path), "--before", rev],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def check(path: Path) -> None:
    """The frame equals the reference decoder's (upb's messages), with and without args."""
    sys.path.insert(0, str(REPO / "tests"))
    from xplane_reference import assert_same

    started = time.perf_counter()
    frame = assert_same(path)
    assert not isinstance(frame, str), frame
    seconds = time.perf_counter() - started
    print(f"check: {len(frame):,} events, frames equal to the reference's ({seconds:.0f} s)")


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--path", type=Path)
    parser.add_argument("--before", default="bd30631")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--measure", nargs=2, metavar=("METHOD", "PATH"))
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure[0], Path(args.measure[1]), args.before)))
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        path = args.path
        if path is None:
            from trace_load import synthesize

            path = Path(tmp) / "synthetic.xplane.pb"
            synthesize(path, args.events)
        size_mb = path.stat().st_size / 1e6
        print(f"input: {path.name}, {size_mb:.0f} MB")
        runs: dict[str, list[dict[str, float]]] = {method: [] for method in METHODS}
        for _ in range(REPEATS):
            for method in METHODS:
                runs[method].append(_run(method, path, args.before))
        if args.check:
            check(path)
    result: dict[str, Any] = {"file_mb": size_mb}
    for method, rows in runs.items():
        cpu = statistics.median(r["cpu_s"] for r in rows)
        events = rows[0]["events"]
        warm = statistics.median(r["rss_warm_mb"] for r in rows)
        peak = statistics.median(r["rss_peak_mb"] for r in rows)
        result[method] = {
            "cpu_s": cpu,
            "cpu_s_runs": [r["cpu_s"] for r in rows],
            "events": events,
            "events_per_cpu_s": events / cpu,
            "rss_warm_mb": warm,
            "rss_peak_mb": peak,
        }
        print(
            f"  {method:18s} {cpu:6.2f} s CPU  {events / cpu:>11,.0f} events/s  RSS {warm:,.0f} MB"
            f" after warm-up, {peak:,.0f} MB peak (+{peak - warm:,.0f} MB,"
            f" {(peak - warm) / size_mb:.1f}x the file)"
        )
    ratio = result["before"]["cpu_s"] / result["after"]["cpu_s"]
    print(
        f"  before / after: {ratio:.2f}x the speed (args=False: "
        f"{result['before']['cpu_s'] / result['after, args=False']['cpu_s']:.2f}x)"
    )
    result["ratio"] = ratio
    return result


if __name__ == "__main__":
    main()
