"""Before/after measurement of a fix on the user's own model, each side in a fresh process.

``bench_scan``/``bench_remat`` run the model as written and with the fix applied, keep both as
run directories, check that outputs and gradients agree, and compare the figures
(``analyze.compare``: every ratio in plain words, worse included). ``bench_cache`` runs twice
against one persistent compilation cache. ``probe_offload`` tries host offload in a throwaway
process, because on backends without a host memory space it aborts the process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from xlaprof.errors import FixFailed, TargetError

# Outputs and gradients must agree this closely (float32 on one backend).
NUMERIC_RTOL = 1e-4
NUMERIC_ATOL = 1e-5
# The worker's progress lines on stderr start with this (worker.py writes them).
PROGRESS_PREFIX = "xlaprof-progress "

Progress = Callable[[str], None]


@dataclass
class Side:
    name: str
    run_dir: Path
    summary: dict[str, Any] = field(default_factory=dict)
    check_path: Path | None = None
    notes: list[str] = field(default_factory=list)  # what the worker said about its variant


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
    """How one variant runs: the worker's flags (``xlaprof.fixes.worker``)."""

    layers: str | None = None  # the layer stack to rewrite (else one is found)
    steps: int = 5
    warmup: int = 2
    backward: bool = True
    cache_dir: Path | None = None  # a persistent compilation cache
    check: bool = True  # save the first step's outputs and gradients for the numerics check
    layer_pure: bool = False  # scan_layers' is_layer_pure
    stack: str | None = None  # the stack the before run's analysis named (``Owner.attr``)
    # (the before side of ``bench scan``) refuse, at the stack's first call, a call scan could
    # not take, before anything compiles
    probe_scan: bool = False


def run_variant(
    target: str,
    variant: str,
    out: Path,
    options: VariantOptions | None = None,
    *,
    progress: Progress | None = None,
    label: str | None = None,
) -> Side:
    """Run one variant in a fresh Python process and load its run.

    ``progress`` gets one line per thing the worker reports (model built, each step done),
    prefixed with ``label``, so a minute of compiling is never a minute of silence.
    """
    options = options or VariantOptions()
    out.mkdir(parents=True, exist_ok=True)
    check_path = out / "check.pt" if options.check else None
    command = _worker_command(target, variant, out, options, check_path)
    env = {**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU")}
    returncode, stdout, stderr = _run_worker(command, env, progress, label or variant)
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    message = json.loads(lines[-1]) if lines else {}
    if returncode != 0 or "run" not in message:
        reason = message.get("error") or (stderr.strip().splitlines() or ["no output"])[-1]
        if reason.startswith("TargetError: "):  # the worker could not load TARGET: code 17
            raise TargetError(reason.removeprefix("TargetError: "))
        if reason.startswith("FixFailed: "):  # the fix refused the model, with its reason
            fix = "scan" if options.probe_scan else variant
            raise FixFailed(
                f"{fix} does not apply to {target}: {reason.removeprefix('FixFailed: ')}"
            )
        raise FixFailed(f"{variant} run of {target} failed: {reason}")
    side = measured_side(variant, Path(message["run"]), check_path)
    side.notes = [str(n) for n in message.get("notes") or []]
    return side


def _worker_command(
    target: str, variant: str, out: Path, options: VariantOptions, check_path: Path | None
) -> list[str]:
    """The worker's command line for one variant."""
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
    if options.probe_scan:
        command += ["--probe-scan", "1"]
    return command


def _run_worker(
    command: list[str], env: dict[str, str], progress: Progress | None, label: str
) -> tuple[int, str, str]:
    """Run the worker; pass its progress lines on as they come; (exit code, stdout, stderr).

    stdout goes to a file (a factory may print a lot: a pipe left unread would block it);
    stderr is read line by line, progress lines to ``progress``, the rest kept for the error.
    """
    started = time.monotonic()
    if progress is not None:
        progress(f"{label}: starting a fresh process")
    kept: list[str] = []
    with tempfile.TemporaryFile("w+") as stdout:
        process = subprocess.Popen(
            command, stdout=stdout, stderr=subprocess.PIPE, text=True, env=env
        )
        assert process.stderr is not None
        for line in process.stderr:
            if line.startswith(PROGRESS_PREFIX):
                if progress is not None:
                    what = line.removeprefix(PROGRESS_PREFIX).strip()
                    progress(f"{label} ({time.monotonic() - started:.0f} s): {what}")
            else:
                kept.append(line)
                del kept[:-200]  # only the last lines can be the reason
        returncode = process.wait()
        stdout.seek(0)
        return returncode, stdout.read(), "".join(kept)


def measured_side(name: str, run_dir: Path, check_path: Path | None = None) -> Side:
    """One side of a benchmark: the run directory ``run_dir`` analyzed by the pipeline, as
    ``xlaprof analyze`` does, so that its figures (the median steady step first) are the ones
    analyze and diff show for the same run."""
    from xlaprof.pipeline import AnalysisRequest, analyze

    (part,) = analyze(AnalysisRequest((run_dir,))).parts
    return Side(name, run_dir, dict(part.figures), check_path)


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


def _stack_from_analysis(run_dir: Path) -> str | None:
    """The layer stack the unrolled-loop analysis of a run names, as ``Owner.attr``."""
    from xlaprof.pipeline import AnalysisRequest, analyze

    findings = [f for part in analyze(AnalysisRequest((run_dir,))).parts for f in part.findings]
    for finding in findings:
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


def bench_fix(
    kind: str,
    target: str,
    out: Path,
    repeats: int = 1,
    progress: Progress | None = None,
    **options: Any,
) -> BenchResult:
    """``kind`` is scan or remat: before and after, numerics, comparison.

    With ``repeats`` > 1 both sides run that many times, alternating, in fresh processes, and
    each figure is the median; the numerical check uses the first pair.
    """
    from xlaprof.tables.compare import compare

    pure = options.pop("layer_pure", False)
    base = VariantOptions(**options)
    befores: list[Side] = []
    afters: list[Side] = []
    stack = None
    notes = []
    for index in range(repeats):
        suffix = "" if repeats == 1 else f"-{index}"
        of = "" if repeats == 1 else f", run {index + 1} of {repeats}"
        befores.append(
            run_variant(
                target,
                "before",
                out / f"before{suffix}",
                replace(base, probe_scan=kind == "scan" and index == 0),
                progress=progress,
                label=f"before{of}",
            )
        )
        if index == 0 and base.layers is None and kind in ("scan", "remat"):
            stack = _stack_from_analysis(befores[0].run_dir)
            if stack:
                notes.append(f"layers: {stack}, from the unrolled-loop analysis of the before run")
        afters.append(
            run_variant(
                target,
                kind,
                out / f"after{suffix}",
                replace(base, layer_pure=pure, stack=stack),
                progress=progress,
                label=f"{kind}{of}",
            )
        )
    before, after = befores[0], afters[0]
    notes.extend(after.notes)
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


def bench_cache(
    target: str, out: Path, progress: Progress | None = None, **options: Any
) -> BenchResult:
    """Two runs against one persistent compilation cache: the second should skip compiling.

    Unless the second run loaded programs from the cache, no row is offered as the cache's
    effect: the figures stay, the ratios and their words go (run-to-run noise is not a gain).
    """
    from xlaprof.tables.compare import compare

    cache = out / "cache"
    first, second = (
        run_variant(
            target,
            "cache",
            out / name,
            VariantOptions(**options, cache_dir=cache, check=False),
            progress=progress,
            label=f"{name} run",
        )
        for name in ("first", "second")
    )
    comparison = compare(first.summary, second.summary)
    verdict, loaded = _cache_verdict(second)
    if not loaded:
        comparison["ratio"] = None
        comparison["change"] = "not compared: nothing loaded from the cache"
    result = BenchResult("cache", target, first, second, comparison)
    result.notes.append(verdict)
    return result


def _cache_verdict(second: Side) -> tuple[str, bool]:
    """What the second run's cache counters say, and whether it loaded anything from the cache.

    A compile time is only the cache's doing if the cache hit and nothing failed to load.
    """
    figures = second.summary  # the pipeline's (``measured_side``): the last report's counters
    failures = figures.get("cache_deserialize_failures") or 0
    hits = figures.get("cache_hits") or 0
    second.summary["persistent_cache"] = {
        "hits": hits,
        "misses": figures.get("cache_misses") or 0,
        "deserialize_failures": failures,
    }
    if failures:
        return (
            f"the cache did not load: the second run could not read its entries on this backend "
            f"(PersistentCacheDeserializeFailure = {failures}) and compiled again, so no "
            "difference between the runs is the cache's doing (no ratio shown)"
        ), False
    if hits:
        return f"the second run loaded {hits} compiled program(s) from the cache", True
    return (
        "the cache did not load: the second run recorded no cache hit, so no difference "
        "between the runs is the cache's doing (no ratio shown)"
    ), False


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
