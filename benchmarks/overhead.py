"""What profiling costs: `xlaprof run` vs a bare run, and each of its parts on its own.

Run: python benchmarks/overhead.py [--repeats N] [--part-repeats M] [--json FILE]
                                   [--workloads tiny,mlp24,matmul] [--no-regions] [--no-pin]
                                   [--level1]
     (needs the runtime extra; PJRT_DEVICE=CPU is set here)

Three workloads (``overhead_loop.py``): a tracing-bound loop of tiny ops, a 24-layer MLP with
Adam, a device-bound matmul loop.

**The headline**: each repeat runs, per workload, a bare process, the default `xlaprof run` and
a second bare process (the control: its ratio to the first is the noise floor of a ratio between
processes), in an order rotated each repeat so drift on a shared machine hits every variant
alike. Ratios are taken within a repeat (a variant over the bare process next to
it); the median over repeats is reported with its interquartile range and range. Step time is
throughput (steady wall time / steps): what a job feels over an epoch, occasional costs
included; the median step is reported beside it.

**Each part on its own**, measured where it runs and inside one process (switched on and off
between blocks of 5 steps, ``overhead_loop.py --toggle``, for 3x the headline's steps), in
the first ``--part-repeats`` repeats: the step boundary (metric reads, the row kept, IR debug
switched, log sizes, the once-a-second flush), the host sampler thread, IR debug (per-op Python
stacks: on through warm-up and after compiles only). The machine's drift between processes
(+-4-8% in step time on the 2-core VM this was measured on, even with the settings below) is
larger than any part, so a part's cost comes from within one process, where it is a difference of
a few microseconds. Where a part cannot be switched inside a process: PT_XLA_DEBUG output (torch_xla
reads its level once) is measured per execution on a one-op loop at levels 0, 1 and 2; the
sync hook per call on a stand-in; a region per call against a bare ``xp.Trace``. The sum of the
steady-state parts (boundary, sampler, debug output for one execution a step) is reported as a
share of the bare step: the estimate with the least noise.

``--before DIR`` adds a process to each repeat: the default `xlaprof run` with another checkout's
package first on the path (DIR: a ``git worktree`` of an earlier commit), so one run shows what a
change to the session costs next to the bare process and the current default (issue 45: each
execution's launch and completion kept at the boundary, the drain read at the end).

``--level1`` adds a fourth process to each repeat: `xlaprof run --debug-level 1`, which
keeps torch_xla's analysis of compilations but not of every execution (the default's largest
steady cost on a tracing-bound loop, which torch_xla cannot switch inside a process), so one run
shows what that analysis costs next to everything else xlaprof does. What level 1 loses in
findings: ``frames_findings.py --compare debug-level --corpus``.

Also: host tracing under xlaprof vs bare: the host CPU before the step's sync (the user's code
and its tracing) that xlaprof records in ``steps.jsonl`` (``host_cpu_s - sync_cpu_s``) over the
bare process's own, and the same for ``LazyTracing`` (means over the same steps); the whole
step's host CPU (with torch_xla's work in the sync, which the tracing-bound verdict uses: mean
and median), the CPU in the sync recorded minus bare (where PT_XLA_DEBUG's per-execution
analysis lands), and peak RSS.

Every process runs with ``PYTHONHASHSEED=0``, address-space randomization off (``setarch -R``,
where it exists) and Eigen's pool off (``--xla_cpu_multi_thread_eigen=false``): with the pool on,
device-bound steps went bimodal between processes. That does not give the device a core of its
own: XLA's CPU backend still splits an execution into parallel tasks over every core (pinned to
one core, the matmul step takes 12.1 ms instead of 6.5), so unpinned, any host CPU xlaprof adds
is taken from the "device", which never happens on a TPU or GPU host. By default each loop
therefore runs with ``--pin`` (after warm-up: Python's threads on the last core, the runtime's
native threads on the others), the accelerator's arrangement; ``--no-pin`` measures the
unpinned CPU runtime, where a device-bound step pays for the host's work.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOOP = HERE / "overhead_loop.py"
# workload -> steps per process (after the loop's own warm-up of 20, or 40 for matmul)
WORKLOADS = {"tiny": 420, "mlp24": 140, "matmul": 340}
if os.environ.get("XLAPROF_BENCH_STEPS"):  # a quick smoke run: fewer steps per process
    WORKLOADS = dict.fromkeys(WORKLOADS, int(os.environ["XLAPROF_BENCH_STEPS"]))
LABELS = {
    "tiny": "tiny ops (tracing-bound)",
    "mlp24": "24-layer MLP + Adam",
    "matmul": "matmul (device-bound)",
}
# variant -> (xlaprof run options or None for a bare process, overhead_loop options)
HEADLINE: dict[str, tuple[list[str] | None, list[str]]] = {
    "bare": (None, []),
    "default": ([], []),
    # A second bare process: its ratio to the first is the noise floor of a ratio between
    # processes on this machine, which the default's ratio is read against.
    "bare (control)": (None, []),
}
# ``--level1``: the default without torch_xla's per-execution analysis (see the docstring).
LEVEL1 = "level 1"
LEVEL1_VARIANT: tuple[list[str] | None, list[str]] = (["--debug-level", "1"], [])
# ``--before DIR``: the default run with another checkout's xlaprof (its folder on PYTHONPATH).
BEFORE = "default, before"
BEFORE_PATH: dict[str, str] = {}
PARTS: dict[str, tuple[list[str] | None, list[str]]] = {
    "step boundary": ([], ["--toggle", "boundary"]),
    "host sampler": (None, ["--toggle", "sampler"]),
    "IR debug (warm-up and after compiles only)": (None, ["--toggle", "ir_debug"]),
}
# A part is a few microseconds in steps of milliseconds: its processes run longer.
PART_STEPS = 3
DEBUG_LEVELS = (0, 1, 2)
TRIVIAL_STEPS = 1500
# Whether each loop gives the CPU device cores of its own (``overhead_loop.py --pin``).
PIN = {"on": True}
BOOTSTRAP = 4000  # resamples for a median's confidence interval
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


def _run(
    workload: str,
    variant: tuple[list[str] | None, list[str]],
    out: Path,
    prefix: list[str],
    steps: int,
    env: dict[str, str] | None = None,
) -> dict[str, float]:
    options, loop_options = variant
    command = [sys.executable, str(LOOP), workload, "--steps", str(steps), *loop_options]
    if PIN["on"]:
        command.append("--pin")
    if options is not None:
        run = [sys.executable, "-m", "xlaprof", "run", "-q", *options, "--out", str(out), "--"]
        command = [*run, *command]
    full_env = {**os.environ, **STEADY_ENV, **(env or {})}
    done = subprocess.run(
        [*prefix, *command], capture_output=True, text=True, env=full_env, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{workload} {command} failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if options is not None and not loop_options:
        result.update(_recorded(out, int(result["steps"])))
    return result


def _recorded(out: Path, steady: int) -> dict[str, float]:
    """What xlaprof recorded for the loop's steady steps (its last ``steady`` rows, those
    without a compile), as means per step, as the loop measures the bare process."""
    rows = [json.loads(line) for path in out.glob("*/steps.jsonl") for line in path.open()]
    rows = [r for r in rows[-steady:] if not r.get("compiles")]
    if not rows:
        return {}
    recorded = {
        "recorded_cpu_s": statistics.fmean(r["host_cpu_s"] for r in rows),
        "recorded_cpu_median_s": statistics.median(r["host_cpu_s"] for r in rows),
        "recorded_tracing_s": statistics.fmean(r["tracing_s"] for r in rows),
    }
    split = [r for r in rows if r.get("sync_cpu_s") is not None]
    if split:  # the host CPU before the step's sync: user code and its tracing
        recorded["recorded_traced_cpu_s"] = statistics.fmean(
            r["host_cpu_s"] - r["sync_cpu_s"] for r in split
        )
        recorded["recorded_sync_cpu_s"] = statistics.fmean(r["sync_cpu_s"] for r in split)
    return recorded


def measure(repeats: int, part_repeats: int) -> dict[str, object]:
    names = list(HEADLINE)
    headline = {w: {v: [] for v in names} for w in WORKLOADS}
    parts: dict[str, dict[str, list[dict[str, float]]]] = {
        w: {p: [] for p in PARTS} for w in WORKLOADS
    }
    debug: dict[int, list[dict[str, float]]] = {level: [] for level in DEBUG_LEVELS}
    prefix = _no_aslr()
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(repeats):
            for workload, steps in WORKLOADS.items():
                shift = repeat % len(names)  # rotate the order so no variant always runs first
                for variant in names[shift:] + names[:shift]:
                    out = Path(tmp) / f"{workload}-{variant.replace(' ', '_')}-{repeat}"
                    env = None
                    if variant == BEFORE:
                        env = {"PYTHONPATH": BEFORE_PATH["dir"]}
                    result = _run(workload, HEADLINE[variant], out, prefix, steps, env)
                    headline[workload][variant].append(result)
                    shutil.rmtree(out, ignore_errors=True)
                if repeat < part_repeats:
                    for part, variant_options in PARTS.items():
                        out = Path(tmp) / f"{workload}-part-{repeat}"
                        part_steps = PART_STEPS * steps
                        result = _run(workload, variant_options, out, prefix, part_steps)
                        parts[workload][part].append(result)
                        shutil.rmtree(out, ignore_errors=True)
                print(f"  repeat {repeat + 1}/{repeats} {workload} done", file=sys.stderr)
            if repeat < part_repeats:
                for level in DEBUG_LEVELS:
                    env = {
                        "PT_XLA_DEBUG_LEVEL": str(level),
                        "PT_XLA_DEBUG_FILE": str(Path(tmp) / "debug.log"),
                    }
                    result = _run("trivial", (None, []), Path(tmp), prefix, TRIVIAL_STEPS, env)
                    debug[level].append(result)
                    (Path(tmp) / "debug.log").unlink(missing_ok=True)
    debug_us = {
        f"level {level} - level 0": statistics.median(
            (r["cpu_s"] - b["cpu_s"]) * 1e6 for r, b in zip(runs, debug[0], strict=True)
        )
        for level, runs in debug.items()
        if level and runs
    }
    default_level = debug_us.get("level 2 - level 0")
    return {
        "workloads": {w: _summarize(headline[w], parts[w], default_level) for w in WORKLOADS},
        "debug_output_us_per_execution": debug_us,
    }


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
        return {"median": None, "low": None, "high": None, "q1": None, "q3": None, "n": 0}
    ordered = sorted(values)
    quartiles = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else [ordered[0]] * 3
    return {
        "median": statistics.median(ordered),
        "low": ordered[0],
        "high": ordered[-1],
        "q1": quartiles[0],
        "q3": quartiles[2],
        "n": len(ordered),
    }


def _median_ci(values: list[float], level: float = 0.9) -> tuple[float, float] | None:
    """A bootstrap confidence interval of the median of ``values`` (percentile method, a
    fixed seed so a report can be recomputed): how far the headline median may be from what
    more repeats would give, on a machine where one process differs from the next by a few
    percent."""
    if len(values) < 5:
        return None
    rng = random.Random(0)
    medians = sorted(
        statistics.median(rng.choices(values, k=len(values))) for _ in range(BOOTSTRAP)
    )
    tail = (1 - level) / 2
    return medians[int(tail * BOOTSTRAP)], medians[int((1 - tail) * BOOTSTRAP) - 1]


def _median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _part_cost(runs: list[dict[str, float]], key: str) -> float | None:
    """Median over processes of (part on - part off), seconds per step."""
    values = [r[f"on_{key}"] - r[f"off_{key}"] for r in runs if f"on_{key}" in r]
    return statistics.median(values) if values else None


def _summarize(
    runs: dict[str, list[dict[str, float]]],
    parts: dict[str, list[dict[str, float]]],
    debug_us: float | None,
) -> dict[str, object]:
    bare_step = statistics.median(r["step_s"] for r in runs["bare"])
    bare_cpu = statistics.median(r["cpu_s"] for r in runs["bare"])
    default = runs["default"]
    part_us = {}
    for part, part_runs in parts.items():
        step_cost = _part_cost(part_runs, "step_s")
        cpu_cost = _part_cost(part_runs, "cpu_s")
        part_us[part] = {
            "step_us": None if step_cost is None else step_cost * 1e6,
            "host_cpu_us": None if cpu_cost is None else cpu_cost * 1e6,
            "pct_of_bare_step": None if step_cost is None else 100 * step_cost / bare_step,
            "processes": len(part_runs),
        }
    steady = [part_us["step boundary"]["step_us"], part_us["host sampler"]["step_us"], debug_us]
    parts_sum = None if None in steady else sum(steady)  # type: ignore[arg-type]
    control = _paired(runs, "bare (control)", "step_s")
    inside = [r["boundary_mean_s"] for r in default if r.get("boundary_mean_s") is not None]
    hook = [r["hook_s"] for r in default if r.get("hook_s") is not None]
    # All bare processes pooled (bare and control): a second estimate, with twice the bare
    # samples of a paired ratio.
    pooled = [r["step_s"] for name in ("bare", "bare (control)") for r in runs[name]]
    return {
        "bare_step_ms": bare_step * 1e3,
        **_against_bare(runs, "default"),
        "control_ratio_ci90": _median_ci(control),
        "ratio_pooled": statistics.median(r["step_s"] for r in default) / statistics.median(pooled),
        "bare_host_cpu_ms": bare_cpu * 1e3,
        "ratio_median_step": _spread(_paired(runs, "default", "step_median_s")),
        "control_ratio": _spread(control),
        "control_ratios_per_repeat": control,
        "parts": part_us,
        "steady_parts_sum_us": parts_sum,
        "steady_parts_sum_pct_of_bare_step": (
            None if parts_sum is None else 100 * parts_sum / (bare_step * 1e6)
        ),
        "boundary_inside_us": _median_or_none([s * 1e6 for s in inside]),
        "sync_hook_ns_per_call": _median_or_none([s * 1e9 for s in hook]),
        "host_cpu_recorded_vs_bare": _spread(_paired(runs, "default", "recorded_cpu_s", "cpu_s")),
        "host_cpu_median_recorded_vs_bare": _spread(
            _paired(runs, "default", "recorded_cpu_median_s", "cpu_median_s")
        ),
        "host_tracing_cpu_recorded_vs_bare": _spread(
            _paired(runs, "default", "recorded_traced_cpu_s", "traced_cpu_s")
        ),
        "sync_cpu_recorded_minus_bare_us": _median_or_none(
            [
                (v["recorded_sync_cpu_s"] - (b["cpu_s"] - b["traced_cpu_s"])) * 1e6
                for v, b in zip(default, runs["bare"], strict=True)
                if "recorded_sync_cpu_s" in v and "traced_cpu_s" in b
            ]
        ),
        "lazy_tracing_recorded_vs_bare": _spread(
            _paired(runs, "default", "recorded_tracing_s", "lazy_tracing_s")
        ),
        "rss_mb_bare": statistics.median(r["rss_mb"] for r in runs["bare"]),
        "rss_mb_xlaprof": statistics.median(r["rss_mb"] for r in default),
        "runs_per_variant": len(default),
        **(_against_bare(runs, LEVEL1, prefix="level1_") if LEVEL1 in runs else {}),
        **(_against_bare(runs, BEFORE, prefix="before_") if BEFORE in runs else {}),
        **(_before_figures(runs) if BEFORE in runs else {}),
    }


def _before_figures(runs: dict[str, list[dict[str, float]]]) -> dict[str, object]:
    """The default's step time and boundary over the earlier checkout's, repeat by repeat."""
    ratios = [
        d["step_s"] / b["step_s"]
        for d, b in zip(runs["default"], runs[BEFORE], strict=True)
        if d.get("step_s") and b.get("step_s")
    ]
    inside = [r["boundary_mean_s"] for r in runs[BEFORE] if r.get("boundary_mean_s") is not None]
    return {
        "after_over_before": _spread(ratios),
        "after_over_before_ci90": _median_ci(ratios),
        "before_boundary_inside_us": _median_or_none([s * 1e6 for s in inside]),
    }


def _against_bare(
    runs: dict[str, list[dict[str, float]]], variant: str, prefix: str = ""
) -> dict[str, object]:
    """``variant``'s step time and host CPU over the bare process's, one ratio per repeat: the
    median's spread and 90% interval, and each repeat's ratio (keys start with ``prefix``)."""
    ratios = _paired(runs, variant, "step_s")
    return {
        f"{prefix}ratio": _spread(ratios),
        f"{prefix}ratio_ci90": _median_ci(ratios),
        f"{prefix}ratios_per_repeat": ratios,
        f"{prefix}cpu_ratio": _spread(_paired(runs, variant, "cpu_s")),
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


def _interval(bounds: object) -> str:
    if not bounds:
        return "—"
    assert isinstance(bounds, (list, tuple))
    return f"{bounds[0]:.3f}-{bounds[1]:.3f}"


def report(figures: dict[str, object], regions: dict[str, float], repeats: int) -> None:
    workloads = figures["workloads"]
    assert isinstance(workloads, dict)
    print(
        f"xlaprof run vs bare: median over {repeats} repeats of alternating processes "
        "(interquartile range, range); "
        + ("host and device threads on cores of their own" if figures["pinned"] else "unpinned")
    )
    for workload, row in workloads.items():
        print(
            f"  {LABELS[workload]}: bare {row['bare_step_ms']:.3f} ms/step, host CPU "
            f"{row['bare_host_cpu_ms']:.3f} ms/step"
        )
        print(f"      step time (throughput), xlaprof run / bare  {_range(row['ratio'])}")
        print(
            f"          90% confidence interval of that median  {_interval(row['ratio_ci90'])}; "
            f"of the control's {_interval(row['control_ratio_ci90'])}"
        )
        print(
            "          median xlaprof step / median of all bare processes (bare and control) "
            f"{row['ratio_pooled']:.3f}"
        )
        print(
            f"      median step, xlaprof run / bare            {_range(row['ratio_median_step'])}"
        )
        print(f"      host CPU per step, xlaprof run / bare      {_range(row['cpu_ratio'])}")
        if "level1_ratio" in row:
            print(
                f"      --debug-level 1 / bare: step {_range(row['level1_ratio'])}, 90% CI "
                f"{_interval(row['level1_ratio_ci90'])}; host CPU {_range(row['level1_cpu_ratio'])}"
            )
        if "before_ratio" in row:
            print(
                f"      earlier checkout's xlaprof run / bare: step {_range(row['before_ratio'])}, "
                f"90% CI {_interval(row['before_ratio_ci90'])}"
            )
            print(
                f"      this xlaprof run / the earlier one, per repeat: step "
                f"{_range(row['after_over_before'])}, 90% CI "
                f"{_interval(row['after_over_before_ci90'])}; boundary CPU "
                f"{_fmt(row['boundary_inside_us'], '.1f')} us vs "
                f"{_fmt(row['before_boundary_inside_us'], '.1f')} us"
            )
        print(f"      control: a second bare process / bare       {_range(row['control_ratio'])}")
        print(
            "      host tracing recorded / bare: CPU before the sync  "
            f"{_range(row['host_tracing_cpu_recorded_vs_bare'])}"
        )
        print(
            "                                    LazyTracing          "
            f"{_range(row['lazy_tracing_recorded_vs_bare'])}"
        )
        print(
            "      host CPU recorded / bare (with the sync): mean     "
            f"{_range(row['host_cpu_recorded_vs_bare'])}"
        )
        print(
            "                       median (the tracing-bound basis) "
            f"{_range(row['host_cpu_median_recorded_vs_bare'])}"
        )
        print(
            "      CPU in the sync, recorded minus bare (us per step; PT_XLA_DEBUG's analysis) "
            f"{_fmt(row['sync_cpu_recorded_minus_bare_us'], '.1f')}"
        )
        print("      each part, on minus off inside one process (us per step; % of a bare step):")
        for part, cost in row["parts"].items():
            print(
                f"        {part:46s} step {_fmt(cost['step_us'], '8.1f')}  host CPU "
                f"{_fmt(cost['host_cpu_us'], '8.1f')}  {_fmt(cost['pct_of_bare_step'], '6.2f')}%"
                f"  ({cost['processes']} processes)"
            )
        print(
            f"        steady-state sum (boundary + sampler + debug output, 1 execution a step) "
            f"{_fmt(row['steady_parts_sum_us'], '.1f')} us = "
            f"{_fmt(row['steady_parts_sum_pct_of_bare_step'], '.2f')}% of a bare step"
        )
        print(
            f"        step boundary, CPU inside it per step (where its time goes)  "
            f"{_fmt(row['boundary_inside_us'], '.1f')} us; sync hook per call "
            f"{_fmt(row['sync_hook_ns_per_call'], '.0f')} ns"
        )
        print(
            f"      peak RSS: bare {_fmt(row['rss_mb_bare'], '.0f')} MB, xlaprof run "
            f"{_fmt(row['rss_mb_xlaprof'], '.0f')} MB"
        )
    print("PT_XLA_DEBUG output, host CPU per execution (one-op loop, medians over processes):")
    debug = figures["debug_output_us_per_execution"]
    assert isinstance(debug, dict)
    for label, us in debug.items():
        print(f"  {label:18s} {us:8.1f} us")
    if regions:
        trace = regions["bare xp.Trace"]
        print("Per-call cost of a region (ns; ratio to a bare xp.Trace):")
        for label, ns in regions.items():
            print(f"  {label:34s} {ns:8.0f} ns   {ns / trace:6.3f}x xp.Trace")


def main() -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=16, help="processes per variant (16)")
    parser.add_argument(
        "--part-repeats", type=int, default=3, help="processes per part measured alone (3)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="default: all three")
    parser.add_argument("--no-regions", action="store_true", help="skip the region call cost")
    parser.add_argument(
        "--no-pin",
        action="store_true",
        help="let the CPU device's threads share the host's cores (the device-bound loop's step "
        "then holds any host CPU added to it)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="also run the default with this checkout's xlaprof (a git worktree of an earlier "
        "commit), in the same repeats",
    )
    parser.add_argument(
        "--level1",
        action="store_true",
        help="also run `xlaprof run --debug-level 1` in each repeat (no per-execution analysis)",
    )
    args = parser.parse_args()
    if args.level1:
        HEADLINE[LEVEL1] = LEVEL1_VARIANT
    if args.before:
        HEADLINE[BEFORE] = ([], [])
        BEFORE_PATH["dir"] = str(args.before.resolve())
    for name in set(WORKLOADS) - set(args.workloads.split(",")):
        del WORKLOADS[name]
    PIN["on"] = not args.no_pin
    figures = {**measure(args.repeats, min(args.part_repeats, args.repeats)), "pinned": PIN["on"]}
    regions = {} if args.no_regions else region_cost()
    report(figures, regions, args.repeats)
    figures = {**figures, "region_ns": regions, "repeats": args.repeats}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
