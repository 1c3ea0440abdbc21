"""What profiling costs: `xlaprof run` vs a bare run, part by part, and the cost of a region.

Run: python benchmarks/overhead.py [--repeats N] [--json FILE]
     (needs the runtime extra; PJRT_DEVICE=CPU is set here)

One run, three workloads (``overhead_loop.py``: a tracing-bound loop of tiny ops, a 24-layer
MLP with Adam, a device-bound matmul loop). Each repeat runs, per workload, a bare process and
`xlaprof run` processes in a rotating order (bare, default, then the default with one part
switched off), so drift on a shared machine hits every variant alike. Each ratio is taken
within one repeat (a variant over the bare process next to it), and the median over repeats is
reported with the range. Reported:

* the ratio of the default `xlaprof run` step time to bare (wall; and host CPU per step);
* what IR debug (per-op Python stacks) costs the host, measured inside one bare process that
  switches it on and off every other step: the cost the per-step scheme avoids after warm-up;
* the share of each part, as what switching it off saves, in % of a bare step: the host sampler
  (``XLAPROF_SAMPLE_HZ=0``), PT_XLA_DEBUG output (``--debug-level 0``), graphs (``--no-graphs``:
  no HLO dump and no IR debug), and the step boundary (metric reads, row written: timed
  directly inside the profiled process). ``frames always`` is IR debug on throughout (the
  behaviour before source frames were switched per step), for comparison;
* host tracing under xlaprof vs bare: the host CPU per step xlaprof records (``steps.jsonl``,
  what the tracing-bound verdict uses) over the bare process's own measure, the LazyTracing
  time xlaprof records over the bare one, and the Python time before each sync;
* peak RSS of the training process with and without xlaprof.

Absolute times on a shared machine are noisy; ratios within one run much less so. Re-run on a
quiet machine before quoting figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOOP = HERE / "overhead_loop.py"
# workload -> its steps (after the loop's own warm-up of 20, or 40 for matmul)
WORKLOADS = {"tiny": 220, "mlp24": 120, "matmul": 120}
if os.environ.get("XLAPROF_BENCH_STEPS"):  # a quick smoke run: fewer steps per process
    WORKLOADS = dict.fromkeys(WORKLOADS, int(os.environ["XLAPROF_BENCH_STEPS"]))
LABELS = {
    "tiny": "tiny ops (tracing-bound)",
    "mlp24": "24-layer MLP + Adam",
    "matmul": "matmul (device-bound)",
}
# variant -> (xlaprof run options, extra environment); None options: the bare process.
VARIANTS: dict[str, tuple[list[str] | None, dict[str, str]]] = {
    "bare": (None, {}),
    "default": ([], {}),
    "no sampler": ([], {"XLAPROF_SAMPLE_HZ": "0"}),
    "no debug output": (["--debug-level", "0"], {}),
    "no graphs": (["--no-graphs"], {}),
    "frames always": ([], {"XLAPROF_SOURCE_FRAMES": "always"}),
}
ALTERNATING = "bare, IR debug every other step"
PARTS = {  # part -> the variant that switches it off
    "host sampler (100 Hz)": "no sampler",
    "PT_XLA_DEBUG output": "no debug output",
    "graphs (IR debug switched, HLO dump)": "no graphs",
}


def _run(workload: str, variant: str, out: Path) -> dict[str, float]:
    if variant == ALTERNATING:
        options, extra = None, {"XLA_HLO_DEBUG": "1"}
    else:
        options, extra = VARIANTS[variant]
    env = {**os.environ, "PJRT_DEVICE": "CPU", **extra}
    command = [sys.executable, str(LOOP), workload, "--steps", str(WORKLOADS[workload])]
    if variant == ALTERNATING:
        command.append("--alternate-ir-debug")
    if options is not None:
        command = [
            sys.executable,
            "-m",
            "xlaprof",
            "run",
            "-q",
            *options,
            "--out",
            str(out),
            "--",
            *command,
        ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{workload}/{variant} failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if options is not None:
        result.update(_recorded(out))
    return result


def _recorded(out: Path) -> dict[str, float]:
    """What xlaprof recorded for the steady steps: median host CPU and LazyTracing per step."""
    rows = [json.loads(line) for path in out.glob("*/steps.jsonl") for line in path.open()]
    steady = [r for r in rows if not r.get("compiles")][10:]
    if not steady:
        return {}
    return {
        "recorded_cpu_s": statistics.median(r["host_cpu_s"] for r in steady),
        "recorded_tracing_s": statistics.median(r["tracing_s"] for r in steady),
    }


def step_overhead(repeats: int) -> dict[str, dict[str, object]]:
    names = [*VARIANTS, ALTERNATING]
    samples: dict[str, dict[str, list[dict[str, float]]]] = {
        w: {v: [] for v in names} for w in WORKLOADS
    }
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(repeats):
            for workload in WORKLOADS:
                shift = repeat % len(names)  # rotate the order so no variant always runs first
                for variant in names[shift:] + names[:shift]:
                    out = Path(tmp) / f"{workload}-{variant.replace(' ', '_')}-{repeat}"
                    samples[workload][variant].append(_run(workload, variant, out))
                print(f"  repeat {repeat + 1}/{repeats} {workload} done", file=sys.stderr)
    return {w: _summarize(samples[w]) for w in WORKLOADS}


def _median(runs: list[dict[str, float]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def _paired(
    runs: dict[str, list[dict[str, float]]], variant: str, key: str, base: str = "bare"
) -> list[float]:
    """``variant``'s ``key`` over the bare process's, one ratio per repeat."""
    return [
        v[key] / b[key]
        for v, b in zip(runs[variant], runs[base], strict=True)
        if v.get(key) and b.get(key)
    ]


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "low": None, "high": None}
    return {"median": statistics.median(values), "low": min(values), "high": max(values)}


def _summarize(runs: dict[str, list[dict[str, float]]]) -> dict[str, object]:
    bare_step = _median(runs["bare"], "step_s")
    assert bare_step
    ratio = {v: _paired(runs, v, "step_s") for v in VARIANTS if v != "bare"}
    parts = {
        part: 100
        * statistics.median(
            (d["step_s"] - o["step_s"]) / b["step_s"]
            for d, o, b in zip(runs["default"], runs[variant], runs["bare"], strict=True)
        )
        for part, variant in PARTS.items()
    }
    boundary = [  # CPU time of the boundary over the bare step's host CPU
        d["boundary_s"] / b["cpu_s"]
        for d, b in zip(runs["default"], runs["bare"], strict=True)
        if d.get("boundary_s") is not None
    ]
    if boundary:
        parts["step boundary (CPU, % of bare host CPU)"] = 100 * statistics.median(boundary)
    alternating = runs[ALTERNATING]
    ir_cost = [r["ir_on_cpu_s"] / r["ir_off_cpu_s"] for r in alternating if r.get("ir_off_cpu_s")]
    recorded_cpu = [
        d["recorded_cpu_s"] / b["cpu_s"]
        for d, b in zip(runs["default"], runs["bare"], strict=True)
        if d.get("recorded_cpu_s") and b.get("cpu_s")
    ]
    recorded_tracing = [
        d["recorded_tracing_s"] / b["lazy_tracing_s"]
        for d, b in zip(runs["default"], runs["bare"], strict=True)
        if d.get("recorded_tracing_s") and b.get("lazy_tracing_s")
    ]
    return {
        "bare_step_ms": bare_step * 1e3,
        "ratio": _spread(ratio["default"]),
        "cpu_ratio": _spread(_paired(runs, "default", "cpu_s")),
        "ratios_by_variant": {v: _spread(r) for v, r in ratio.items()},
        "parts_pct_of_bare_step": parts,
        "ir_debug_host_cpu_on_vs_off": _spread(ir_cost),
        "host_cpu_recorded_vs_bare": _spread(recorded_cpu),
        "lazy_tracing_recorded_vs_bare": _spread(recorded_tracing),
        "python_before_sync_vs_bare": _spread(_paired(runs, "default", "python_s")),
        "rss_mb_bare": _median(runs["bare"], "rss_mb"),
        "rss_mb_xlaprof": _median(runs["default"], "rss_mb"),
        "runs_per_variant": len(runs["default"]),
    }


REGION_CODE = r"""
import json, tempfile, timeit
import torch_xla, torch_xla.debug.profiler as xp
import xlaprof

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


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _range(spread: object) -> str:
    assert isinstance(spread, dict)
    if spread["median"] is None:
        return "—"
    return f"{spread['median']:.3f} [{spread['low']:.3f}-{spread['high']:.3f}]"


def main() -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="processes per variant (5)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="default: all three")
    parser.add_argument("--no-regions", action="store_true", help="skip the region call cost")
    args = parser.parse_args()
    for name in set(WORKLOADS) - set(args.workloads.split(",")):
        del WORKLOADS[name]
    steps = step_overhead(args.repeats)
    regions = {} if args.no_regions else region_cost()
    print(
        f"xlaprof run vs bare: median over {args.repeats} repeats of alternating processes "
        "(range in brackets)"
    )
    for workload, row in steps.items():
        print(
            f"  {LABELS[workload]:26s} bare {row['bare_step_ms']:8.3f} ms/step   xlaprof run "
            f"{_range(row['ratio'])}   host CPU {_range(row['cpu_ratio'])}"
        )
        for variant, ratio in row["ratios_by_variant"].items():  # type: ignore[union-attr]
            if variant != "default":
                print(f"      {variant:20s} {_range(ratio)}")
        print("      share of each part (what switching it off saves, % of a bare step):")
        for part, pct in row["parts_pct_of_bare_step"].items():  # type: ignore[union-attr]
            print(f"        {part:42s} {pct:+6.2f}%")
        print(
            "      IR debug on / off, host CPU per step in one process: "
            f"{_range(row['ir_debug_host_cpu_on_vs_off'])}"
        )
        print(
            f"      host tracing under xlaprof / bare: host CPU recorded "
            f"{_range(row['host_cpu_recorded_vs_bare'])}, LazyTracing recorded "
            f"{_range(row['lazy_tracing_recorded_vs_bare'])}, Python before sync "
            f"{_range(row['python_before_sync_vs_bare'])}"
        )
        print(
            f"      peak RSS: bare {_fmt(row['rss_mb_bare'], '.0f')} MB, xlaprof run "
            f"{_fmt(row['rss_mb_xlaprof'], '.0f')} MB"
        )
    if regions:
        trace = regions["bare xp.Trace"]
        print("Per-call cost of a region (ns; ratio to a bare xp.Trace):")
        for label, ns in regions.items():
            print(f"  {label:34s} {ns:8.0f} ns   {ns / trace:6.3f}x xp.Trace")
    figures = {"step_overhead": steps, "region_ns": regions}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
