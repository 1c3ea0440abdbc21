"""Before/after measurement of a fix on the user's own model, each side in a fresh process.

``bench_scan``/``bench_remat`` run the model as written and with the fix applied, keep both as
run directories, check that outputs and gradients agree, and compare the figures
(``analyze.compare``: every ratio in plain words, worse included). ``bench_cache`` runs twice
against one persistent compilation cache. ``probe_offload`` tries host offload in a throwaway
process, because on backends without a host memory space it aborts the process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xlaprof.errors import FixFailed, TargetError

# Outputs and gradients must agree this closely (float32 on one backend).
NUMERIC_RTOL = 1e-4
NUMERIC_ATOL = 1e-5


@dataclass
class Side:
    name: str
    run_dir: Path | None
    summary: dict[str, Any] = field(default_factory=dict)
    check_path: Path | None = None


@dataclass
class BenchResult:
    kind: str
    target: str
    before: Side
    after: Side
    comparison: Any  # DataFrame from analyze.compare
    numerics: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        rows = self.comparison.astype(object).where(self.comparison.notna(), None)
        return {
            "schema": "xlaprof.bench/1",
            "kind": self.kind,
            "target": self.target,
            "before": {"run": str(self.before.run_dir), "summary": self.before.summary},
            "after": {"run": str(self.after.run_dir), "summary": self.after.summary},
            "comparison": rows.to_dict(orient="records"),
            "numerics": self.numerics,
            "notes": self.notes,
        }


@dataclass(frozen=True)
class VariantOptions:
    """How a variant runs: the worker's flags (``xlaprof.fixes.worker``)."""

    layers: str | None = None  # the layer stack to rewrite (else one is found)
    steps: int = 5
    warmup: int = 2
    backward: bool = True
    cache_dir: Path | None = None  # a persistent compilation cache
    check: bool = True  # save the first step's outputs and gradients for the numerics check
    layer_pure: bool = False  # scan_layers' is_layer_pure
    stack: str | None = None  # the stack the before run's analysis named (``Owner.attr``)


def run_variant(target: str, variant: str, out: Path, options: VariantOptions) -> Side:
    """Run one variant in a fresh Python process and load its run."""
    out.mkdir(parents=True, exist_ok=True)
    check_path = out / "check.pt" if options.check else None
    command = _worker_command(target, variant, out, options, check_path)
    env = {**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU")}
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    message = json.loads(lines[-1]) if lines else {}
    if result.returncode != 0 or "run" not in message:
        reason = message.get("error") or (result.stderr.strip().splitlines() or ["no output"])[-1]
        if reason.startswith("TargetError: "):  # the worker could not load TARGET: code 17
            raise TargetError(reason.removeprefix("TargetError: "))
        raise FixFailed(f"{variant} run of {target} failed: {reason}")
    return _side(variant, Path(message["run"]), check_path)


def _worker_command(
    target: str, variant: str, out: Path, options: VariantOptions, check_path: Path | None
) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "xlaprof.fixes.worker",
        "--target",
        target,
        "--variant",
        variant,
        "--out",
        str(out),
        "--steps",
        str(options.steps),
        "--warmup",
        str(options.warmup),
        "--backward",
        "1" if options.backward else "0",
    ]
    if options.layers:
        command += ["--layers", options.layers]
    if options.layer_pure:
        command += ["--layer-pure", "1"]
    if options.stack:
        command += ["--stack", options.stack]
    if check_path is not None:
        command += ["--check", str(check_path)]
    if options.cache_dir is not None:
        command += ["--cache-dir", str(options.cache_dir)]
    return command


def _side(name: str, run_dir: Path, check_path: Path | None) -> Side:
    from xlaprof.model.input import input_from_run
    from xlaprof.rundir.reader import load_run
    from xlaprof.tables.compare import run_summary

    data = input_from_run(load_run(run_dir))
    summary = run_summary(data)
    intermediate = [
        e.memory.intermediate_bytes
        for e in data.debug.compilations()
        if e.memory is not None and e.memory.intermediate_bytes is not None
    ]
    summary["intermediate_bytes"] = max(intermediate) if intermediate else None
    return Side(name, run_dir, summary, check_path)


def compare_numerics(before: Path, after: Path) -> dict[str, Any]:
    """Do outputs, loss and gradients agree within NUMERIC_RTOL/ATOL?"""
    import torch

    a, b = torch.load(before), torch.load(after)
    worst: tuple[float, str] = (0.0, "")
    problems = []
    for key in ("output", "loss"):
        if a[key].shape != b[key].shape:
            problems.append(f"{key} shape {tuple(a[key].shape)} vs {tuple(b[key].shape)}")
            continue
        diff = float((a[key] - b[key]).abs().max()) if a[key].numel() else 0.0
        worst = max(worst, (diff, key))
        if not torch.allclose(a[key], b[key], rtol=NUMERIC_RTOL, atol=NUMERIC_ATOL):
            problems.append(f"{key} differs by up to {diff:.3g}")
    missing = sorted(set(a["grads"]) ^ set(b["grads"]))
    if missing:
        problems.append(f"gradients missing on one side: {', '.join(missing[:5])}")
    for name in sorted(set(a["grads"]) & set(b["grads"])):
        ga, gb = a["grads"][name], b["grads"][name]
        diff = float((ga - gb).abs().max()) if ga.numel() else 0.0
        worst = max(worst, (diff, f"grad {name}"))
        if not torch.allclose(ga, gb, rtol=NUMERIC_RTOL, atol=NUMERIC_ATOL):
            problems.append(f"gradient of {name} differs by up to {diff:.3g}")
    return {
        "ok": not problems,
        "max_abs_diff": worst[0],
        "worst": worst[1],
        "rtol": NUMERIC_RTOL,
        "atol": NUMERIC_ATOL,
        "problems": problems[:10],
        "gradients_compared": len(set(a["grads"]) & set(b["grads"])),
    }


def _stack_from_analysis(run_dir: Path | None) -> str | None:
    """The layer stack the unrolled-loop analysis of a run names, as ``Owner.attr``."""
    from xlaprof.pipeline import findings_of

    if run_dir is None:
        return None
    for finding in findings_of([run_dir]):
        owner = finding.evidence.get("layer_stack_owner")
        attribute = finding.evidence.get("layer_stack_attribute")
        if finding.kind.value == "unrolled_loop" and owner and attribute:
            return f"{owner}.{attribute}"
    return None


def _median_summary(sides: list[Side]) -> dict[str, Any]:
    """Each numeric figure's median over repeated runs (the first run's for the rest)."""
    import statistics

    merged = dict(sides[0].summary)
    for key in list(merged):
        values = [s.summary.get(key) for s in sides]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if len(numbers) == len(values):
            merged[key] = statistics.median(numbers)
    return merged


def bench_fix(kind: str, target: str, out: Path, repeats: int = 1, **options: Any) -> BenchResult:
    """``kind`` is scan or remat: before and after, numerics, comparison.

    With ``repeats`` > 1 both sides run that many times, alternating, in fresh processes, and
    each figure is the median; the numerical check uses the first pair.
    """
    from xlaprof.tables.compare import compare

    pure = options.pop("layer_pure", False)
    plain = VariantOptions(**options)
    befores: list[Side] = []
    afters: list[Side] = []
    stack = None
    notes = []
    for index in range(repeats):
        suffix = "" if repeats == 1 else f"-{index}"
        befores.append(run_variant(target, "before", out / f"before{suffix}", plain))
        if index == 0 and plain.layers is None and kind in ("scan", "remat"):
            stack = _stack_from_analysis(befores[0].run_dir)
            if stack:
                notes.append(f"layers: {stack}, from the unrolled-loop analysis of the before run")
        rewritten = dataclasses.replace(plain, layer_pure=pure, stack=stack)
        afters.append(run_variant(target, kind, out / f"after{suffix}", rewritten))
    before, after = befores[0], afters[0]
    before.summary, after.summary = _median_summary(befores), _median_summary(afters)
    assert before.check_path is not None and after.check_path is not None
    numerics = compare_numerics(before.check_path, after.check_path)
    comparison = compare(before.summary, after.summary)
    result = BenchResult(kind, target, before, after, comparison, numerics, notes)
    if repeats > 1:
        result.notes.append(f"figures are medians of {repeats} runs of each side")
    if kind == "remat":
        from xlaprof.tables.compare import describe_change

        _ratio, words = describe_change(
            before.summary["intermediate_bytes"], after.summary["intermediate_bytes"]
        )
        result.notes.append(f"intermediate tensor bytes (post-compilation analysis): {words}")
    return result


def bench_cache(target: str, out: Path, **options: Any) -> BenchResult:
    """Two runs against one persistent compilation cache: the second should skip compiling."""
    from xlaprof.tables.compare import compare

    cached = VariantOptions(cache_dir=out / "cache", check=False, **options)
    first = run_variant(target, "cache", out / "first", cached)
    second = run_variant(target, "cache", out / "second", cached)
    result = BenchResult("cache", target, first, second, compare(first.summary, second.summary))
    result.notes.append(_cache_verdict(second))
    return result


def _cache_verdict(second: Side) -> str:
    """What the second run's cache counters say: a compile time is only the cache's if it hit."""
    from xlaprof.rundir.reader import load_run

    assert second.run_dir is not None
    reports = load_run(second.run_dir).metrics_reports()
    counters = reports[-1].counters if reports else {}
    failures = counters.get("PersistentCacheDeserializeFailure") or 0
    hits = counters.get("PersistentCacheHit") or 0
    second.summary["persistent_cache"] = {
        "hits": hits,
        "misses": counters.get("PersistentCacheMiss") or 0,
        "deserialize_failures": failures,
    }
    if failures:
        return (
            f"the second run could not load its cache entries on this backend "
            f"(PersistentCacheDeserializeFailure = {failures}): it compiled again, so any "
            "difference in compile time is not the cache's doing"
        )
    if hits:
        return f"the second run loaded {hits} compiled program(s) from the cache"
    return "the second run recorded no cache hit: compare the compile times with that in mind"


OFFLOAD_PROBE = """
import torch, torch_xla
from torch_xla.experimental.stablehlo_custom_call import place_to_host, place_to_device
x = torch.ones(4, device=torch_xla.device())
y = place_to_device(place_to_host(x * 2))
torch_xla.sync()
print("offload-ok", float(y.sum()))
"""


def probe_offload() -> tuple[bool, str]:
    """Whether this backend has a host memory space (tried in a throwaway process)."""
    env = {**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU")}
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(
            [sys.executable, "-c", OFFLOAD_PROBE],
            capture_output=True,
            text=True,
            env=env,
            cwd=scratch,
            timeout=300,
        )
    if result.returncode == 0 and "offload-ok" in result.stdout:
        return True, "place_to_host/place_to_device ran"
    if result.returncode < 0:
        return False, f"the probe process was killed by signal {-result.returncode}"
    last = (result.stderr.strip().splitlines() or ["no output"])[-1]
    return False, f"the probe failed (exit {result.returncode}): {last[:200]}"
