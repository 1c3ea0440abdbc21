"""What profiling costs: `xlaprof run` vs a bare run, and each of its parts on its own.

Run: python benchmarks/overhead.py [--repeats N] [--json FILE] [--workloads tiny,mlp24,matmul]
     (needs the runtime extra; PJRT_DEVICE=CPU is set here)

Three workloads (``overhead_loop.py``): a tracing-bound loop of tiny ops, a 24-layer MLP with
Adam, a device-bound matmul loop. Each repeat runs, per workload, a bare process, the default
`xlaprof run`, `xlaprof run --debug-level 0`, and a bare process that switches IR debug every
other step, in an order rotated each repeat so drift on a shared machine hits every variant
alike. Ratios are taken within a repeat (a variant over the bare process next to it); the
median over repeats is reported with the range.

Every process runs with ``PYTHONHASHSEED=0`` and address-space randomization off (``setarch
-R``, where it exists), bare and profiled alike: on the 2-core VM this was measured on, the same
bare loop varied by +-9% in step time from one process to the next with both random, +-4%
without (string hashes and addresses change how dicts and the heap lay out).

Reported per workload:

* ``xlaprof run`` / bare: step time (wall, sync to sync: what the job feels) and host CPU per
  step (the stepping thread's CPU time);
* host tracing under xlaprof vs bare: the host CPU per step xlaprof records (``steps.jsonl``,
  what the tracing-bound verdict uses) over the bare process's own measure, and the
  ``LazyTracing`` time xlaprof records over the bare one (both as means over the same steps);
* each part on its own, measured where it runs: the step boundary (metric reads, the row kept,
  IR debug switched, ``stat`` of two logs: CPU time per call inside the profiled process; its
  mean includes the once-a-second flush of rows and ``run.json``), the host sampler (its
  thread's CPU time per step: what it takes from the GIL), PT_XLA_DEBUG output (torch_xla writes
  an analysis of every execution: default vs ``--debug-level 0`` across processes), IR debug
  (per-op Python stacks, on through warm-up only: its cost per step with it on, from the bare
  process that switches it), a region (per call, ``xlaprof.region`` vs a bare ``xp.Trace``) and
  the sync hook (per call);
* peak RSS of the training process with and without xlaprof.
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
ALTERNATING = "bare, IR debug and sampler switched"
# variant -> (xlaprof run options, extra environment); None options: a bare process.
VARIANTS: dict[str, tuple[list[str] | None, dict[str, str]]] = {
    "bare": (None, {}),
    "default": ([], {}),
    "no debug output": (["--debug-level", "0"], {}),
    ALTERNATING: (None, {"XLA_HLO_DEBUG": "1"}),
}
# Same layout in every process, and the CPU device on one thread of its own (see the module
# docstring).
STEADY_ENV = {
    "PYTHONHASHSEED": "0",
    "PJRT_DEVICE": "CPU",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false",
}


def _no_aslr() -> list[str]:
    setarch = shutil.which("setarch")
    if setarch is None:
        return []
    probe = subprocess.run([setarch, os.uname().machine, "-R", "true"], check=False)
    return [setarch, os.uname().machine, "-R"] if probe.returncode == 0 else []


def _run(workload: str, variant: str, out: Path, prefix: list[str]) -> dict[str, float]:
    options, extra = VARIANTS[variant]
    env = {**os.environ, **STEADY_ENV, **extra}
    command = [sys.executable, str(LOOP), workload, "--steps", str(WORKLOADS[workload])]
    if variant == ALTERNATING:
        command.append("--alternate-parts")
    if options is not None:
        run = [sys.executable, "-m", "xlaprof", "run", "-q", *options, "--out", str(out), "--"]
        command = [*run, *command]
    done = subprocess.run([*prefix, *command], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{workload}/{variant} failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if options is not None:
        result.update(_recorded(out, int(result["steps"])))
    return result


def _recorded(out: Path, steady: int) -> dict[str, float]:
    """What xlaprof recorded for the loop's steady steps (its last ``steady`` syncs), measured
    as the loop measures them: median host CPU per step, mean LazyTracing per step."""
    rows = [json.loads(line) for path in out.glob("*/steps.jsonl") for line in path.open()]
    rows = [r for r in rows[-steady:] if not r.get("compiles")]
    if not rows:
        return {}
    return {
        "recorded_cpu_s": statistics.median(r["host_cpu_s"] for r in rows),
        "recorded_tracing_s": statistics.fmean(r["tracing_s"] for r in rows),
    }


def step_overhead(repeats: int) -> dict[str, dict[str, object]]:
    names = list(VARIANTS)
    samples: dict[str, dict[str, list[dict[str, float]]]] = {
        w: {v: [] for v in names} for w in WORKLOADS
    }
    prefix = _no_aslr()
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(repeats):
            for workload in WORKLOADS:
                shift = repeat % len(names)  # rotate the order so no variant always runs first
                for variant in names[shift:] + names[:shift]:
                    out = Path(tmp) / f"{workload}-{variant.replace(' ', '_')}-{repeat}"
                    samples[workload][variant].append(_run(workload, variant, out, prefix))
                    shutil.rmtree(out, ignore_errors=True)
                print(f"  repeat {repeat + 1}/{repeats} {workload} done", file=sys.stderr)
    return {w: _summarize(samples[w]) for w in WORKLOADS}


def _median(runs: list[dict[str, float]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def _paired(
    runs: dict[str, list[dict[str, float]]], variant: str, key: str, base_key: str | None = None
) -> list[float]:
    """``variant``'s ``key`` over the bare process's ``base_key``, one ratio per repeat."""
    base_key = base_key or key
    return [
        v[key] / b[base_key]
        for v, b in zip(runs[variant], runs["bare"], strict=True)
        if v.get(key) and b.get(base_key)
    ]


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "low": None, "high": None, "q1": None, "q3": None}
    ordered = sorted(values)
    quartiles = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else [ordered[0]] * 3
    return {
        "median": statistics.median(ordered),
        "low": ordered[0],
        "high": ordered[-1],
        "q1": quartiles[0],
        "q3": quartiles[2],
    }


def _summarize(runs: dict[str, list[dict[str, float]]]) -> dict[str, object]:
    bare_step = _median(runs["bare"], "step_s")
    bare_cpu = _median(runs["bare"], "cpu_s")
    assert bare_step and bare_cpu
    default = runs["default"]
    boundary = _median(default, "boundary_s")
    boundary_mean = _median(default, "boundary_mean_s")
    hook = _median(default, "hook_s")
    alternating = runs[ALTERNATING]
    ir_on = [r["ir_on_cpu_s"] - r["ir_off_cpu_s"] for r in alternating if r.get("ir_off_cpu_s")]
    sampler = [r["sampler_on_s"] - r["sampler_off_s"] for r in alternating if r.get("sampler_on_s")]
    parts_us = {
        "step boundary, median per step": boundary,
        "step boundary, mean per step (with the once-a-second flush)": boundary_mean,
        "host sampler, step time with it minus without (one process, blocks)": (
            statistics.median(sampler) if sampler else None
        ),
        "sync hook, per call (without the boundary)": hook,
        "IR debug on, extra host CPU per step (warm-up and after compiles only)": (
            statistics.median(ir_on) if ir_on else None
        ),
    }
    return {
        "bare_step_ms": bare_step * 1e3,
        "bare_host_cpu_ms": bare_cpu * 1e3,
        "ratio": _spread(_paired(runs, "default", "step_s")),
        "cpu_ratio": _spread(_paired(runs, "default", "cpu_s")),
        "no_debug_output_ratio": _spread(_paired(runs, "no debug output", "step_s")),
        "debug_output_share": _spread(
            [
                d["step_s"] / n["step_s"]
                for d, n in zip(default, runs["no debug output"], strict=True)
                if d.get("step_s") and n.get("step_s")
            ]
        ),
        "parts_us": {k: None if v is None else v * 1e6 for k, v in parts_us.items()},
        "parts_pct_of_bare_step": {
            k: None if v is None else 100 * v / bare_step for k, v in parts_us.items()
        },
        "host_cpu_recorded_vs_bare": _spread(_paired(runs, "default", "recorded_cpu_s", "cpu_s")),
        "lazy_tracing_recorded_vs_bare": _spread(
            _paired(runs, "default", "recorded_tracing_s", "lazy_tracing_s")
        ),
        "rss_mb_bare": _median(runs["bare"], "rss_mb"),
        "rss_mb_xlaprof": _median(default, "rss_mb"),
        "runs_per_variant": len(default),
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
        env={**os.environ, **STEADY_ENV},
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _range(spread: object) -> str:
    assert isinstance(spread, dict)
    if spread["median"] is None:
        return "—"
    return (
        f"{spread['median']:.3f} [IQR {spread['q1']:.3f}-{spread['q3']:.3f}, "
        f"range {spread['low']:.3f}-{spread['high']:.3f}]"
    )


def report(steps: dict[str, dict[str, object]], regions: dict[str, float], repeats: int) -> None:
    print(
        f"xlaprof run vs bare: median over {repeats} repeats of alternating processes "
        "(interquartile range, range)"
    )
    for workload, row in steps.items():
        print(
            f"  {LABELS[workload]}: bare {row['bare_step_ms']:.3f} ms/step, host CPU "
            f"{row['bare_host_cpu_ms']:.3f} ms/step"
        )
        print(f"      step time, xlaprof run / bare       {_range(row['ratio'])}")
        print(f"      host CPU per step, xlaprof run / bare {_range(row['cpu_ratio'])}")
        print(f"      step time, --debug-level 0 / bare   {_range(row['no_debug_output_ratio'])}")
        print(
            f"      host tracing recorded / bare: host CPU "
            f"{_range(row['host_cpu_recorded_vs_bare'])}"
        )
        print(
            f"                                    LazyTracing "
            f"{_range(row['lazy_tracing_recorded_vs_bare'])}"
        )
        print("      each part where it runs (us; % of a bare step):")
        parts_us = row["parts_us"]
        parts_pct = row["parts_pct_of_bare_step"]
        assert isinstance(parts_us, dict) and isinstance(parts_pct, dict)
        for part, us in parts_us.items():
            print(f"        {part:72s} {_fmt(us, '8.1f')}  {_fmt(parts_pct[part], '6.2f')}%")
        print(
            f"        PT_XLA_DEBUG output, default / --debug-level 0 (across processes)"
            f"      {_range(row['debug_output_share'])}"
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


def main() -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=12, help="processes per variant (12)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="default: all three")
    parser.add_argument("--no-regions", action="store_true", help="skip the region call cost")
    args = parser.parse_args()
    for name in set(WORKLOADS) - set(args.workloads.split(",")):
        del WORKLOADS[name]
    steps = step_overhead(args.repeats)
    regions = {} if args.no_regions else region_cost()
    report(steps, regions, args.repeats)
    figures = {"step_overhead": steps, "region_ns": regions, "repeats": args.repeats}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
