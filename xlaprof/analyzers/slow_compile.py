"""Slow compilation: compile time is a large share of the job, or single compiles are long.

Reads the ``CompileTime`` and ``ExecuteTime`` metrics (or per-step rows). On TPU a large model
can take minutes per compile; unrolled layer stacks and recompilations multiply it.

The fix named is one that applies to the run: where the compile time is a user loop that never
syncs (``unrolled_loop.unsynced``: a sampling loop traced whole into the run's one graph), it is
that loop's fix, not a persistent cache (the graph grows with the iteration count and is
compiled once a process) or ``scan_layers`` (the repeated block is no layer stack).
"""

from __future__ import annotations

from xlaprof.analyzers import unrolled_loop
from xlaprof.analyzers.shared.capture_compiles import NO_DATA, capture_compile_spans, spans_note
from xlaprof.analyzers.shared.sourcecode import bench_factory
from xlaprof.findings import Finding, Kind, Severity, bench_command
from xlaprof.model.input import COMPILE_METRICS, EXECUTE_METRICS, AnalysisInput
from xlaprof.parse.units import format_seconds

# One compile taking this long on average is worth a warning.
SLOW_COMPILE_MEAN_SECONDS = 30.0
# Compile time this large in all is worth a warning whatever its share.
SLOW_COMPILE_TOTAL_SECONDS = 300.0
# Otherwise: compile time at least this share of compile+execute time ...
SLOW_COMPILE_SHARE = 0.5
# ... and at least this many seconds, so tiny CPU test runs do not trip it.
SLOW_COMPILE_SHARE_MIN_SECONDS = 10.0

SUGGESTION = (
    "Enable the persistent compilation cache with torch_xla.runtime.initialize_cache(path) so "
    "restarts reuse compiled programs; remove recompilations; and if the graph repeats a layer "
    "many times, compile one layer with torch_xla.experimental.scan_layers. Measure the cache "
    "on your model as the evidence says (`xlaprof bench cache`, given a function returning "
    "(model, batch))."
)

# A run on the CPU backend: the cache's effect cannot be measured where it ran, so the advice
# that can be acted on here comes first and the cache is named for the accelerator.
CPU_CACHE_NOTE = (
    "no: on the CPU backend torch_xla's persistent cache does not load its entries "
    "(PersistentCacheDeserializeFailure), so `xlaprof bench cache` can only say 'not compared'"
)
CPU_SUGGESTION = (
    "Remove recompilations first (each compiles a graph again), and if the graph repeats a "
    "layer many times, compile one layer with torch_xla.experimental.scan_layers; both can be "
    "measured on this backend. On the accelerator, also enable the persistent compilation "
    "cache (torch_xla.runtime.initialize_cache(path)) so restarts reuse compiled programs, and "
    "measure it there with `xlaprof bench cache`: on the CPU backend it does not load."
)


# torch.compile (a TORCH_TRACE log or dynamo's records with no torch_xla metrics): its caches
# and regional compilation, not torch_xla's.
DYNAMO_SUGGESTION = (
    "Compile less and keep what was compiled: remove recompilations (each compiles the graph "
    "again); compile the repeated block (torch.compile on one layer module) rather than the "
    "whole model; keep inductor's FX-graph and AOTAutograd caches on (the default) and carry "
    "them across machines with torch.compiler.save_cache_artifacts() / "
    "load_cache_artifacts()."
)


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not have looked at ``data`` (no compile records; a capture's
    compile spans are not read here: the step timeline's compile column shows them), or None."""
    if data.compiles() is not None or data.debug.compilations() or _dynamo_seconds(data):
        return None
    spans = capture_compile_spans(data)
    if spans:
        return (
            "needs compile records (CompileTime metrics, a debug log, a run's steps or "
            f"torch.compile's), not {spans_note(spans)}"
        )
    return NO_DATA


def _dynamo_seconds(data: AnalysisInput) -> list[float]:
    """Each torch.compile compile's seconds, where dynamo's records say."""
    return [r.seconds for r in data.dynamo if r.kind == "compile" and r.seconds is not None]


def _device_seconds(data: AnalysisInput) -> float | None:
    """The device's own busy time over the run: its executions' where the run recorded them
    (``AnalysisInput.device``), else ExecuteTime's total (launch to completion, the queue
    included: an overstatement when the host ran ahead)."""
    device = data.device
    if device is not None and not device.lost:
        return sum(device.execution_busy)
    return data.metric_total(*EXECUTE_METRICS)


def analyze(data: AnalysisInput) -> list[Finding]:
    suggestion = SUGGESTION
    compiles: int | None
    compile_s: float | None
    execute_s: float | None
    if not data.reports and not data.steps and _dynamo_seconds(data):
        seconds = _dynamo_seconds(data)
        compiles, compile_s, execute_s = len(seconds), sum(seconds), None
        suggestion = DYNAMO_SUGGESTION
    elif data.reports:
        compiles = data.metric_samples(*COMPILE_METRICS)
        compile_s = data.metric_total(*COMPILE_METRICS)
        execute_s = _device_seconds(data)
    elif data.steps:
        compiles = sum(s.compiles for s in data.steps)
        compile_s = sum(s.compile_s for s in data.steps)
        execute_s = _device_seconds(data)
        if execute_s is None:
            execute_s = sum(s.execute_s for s in data.steps)
    else:
        return []
    if not compiles or compile_s is None:
        return []
    mean = compile_s / compiles
    share = compile_s / (compile_s + execute_s) if execute_s else None
    evidence: dict[str, object] = {
        "compiles": compiles,
        "compile_seconds": round(compile_s, 6),
        "mean_compile_seconds": round(mean, 6),
        "execute_seconds": None if execute_s is None else round(execute_s, 6),
        "compile_share": None if share is None else round(share, 4),
        "bench_command": bench_command(
            "cache", data.script, factory=bench_factory(data.sources, data.script)
        ),
    }
    if suggestion is not DYNAMO_SUGGESTION and (data.device_kind or "").upper() == "CPU":
        # the persistent cache cannot be measured here: on the CPU backend its entries do not
        # load (PersistentCacheDeserializeFailure, torch_xla 2.9), so `bench cache` would spend
        # a minute to say "not compared"
        del evidence["bench_command"]
        evidence["cache_measurable_here"] = CPU_CACHE_NOTE
        suggestion = CPU_SUGGESTION
    if suggestion is DYNAMO_SUGGESTION:  # torch_xla's cache benchmark does not apply
        del evidence["bench_command"]
        timed = [r for r in data.dynamo if r.kind == "compile" and r.seconds is not None]
        timed.sort(key=lambda r: -(r.seconds or 0.0))
        evidence["slowest_compiles"] = [
            f"{r.compile_id} {r.function or '?'}: {format_seconds(r.seconds)}" for r in timed[:3]
        ]
    if mean >= SLOW_COMPILE_MEAN_SECONDS or compile_s >= SLOW_COMPILE_TOTAL_SECONDS:
        severity = Severity.WARNING
        title = (
            f"Compilation took {format_seconds(compile_s)} in {compiles} compiles "
            f"({format_seconds(mean)} each)"
        )
    elif (
        share is not None
        and share >= SLOW_COMPILE_SHARE
        and compile_s >= SLOW_COMPILE_SHARE_MIN_SECONDS
    ):
        severity = Severity.INFO
        title = f"Compilation is {share:.0%} of device-side time ({format_seconds(compile_s)})"
    else:
        return []
    return [
        Finding(
            kind=Kind.SLOW_COMPILE,
            severity=severity,
            title=title,
            evidence=evidence,
            suggestion=_unsynced_loop_fix(data, evidence) or suggestion,
        )
    ]


def _unsynced_loop_fix(data: AnalysisInput, evidence: dict[str, object]) -> str | None:
    """The fix where the compile time is an unrolled loop that never syncs, or None."""
    if not unrolled_loop.never_steps(data):
        return None
    loops = [f for f in unrolled_loop.analyze(data) if f.evidence.get("fix_kind")]
    if not loops:
        return None
    loop = loops[0]
    evidence["unrolled_loop"] = str(loop.location)
    evidence.pop("bench_command", None)  # a cache measured on one graph run once says nothing
    how = (
        "sync once per iteration (torch_xla.sync() at the end of its body)"
        if loop.evidence["fix_kind"] == "sync_per_iteration"
        else "run its body with torch_xla.experimental.scan, or sync once per iteration"
    )
    return (
        f"This is the compile of the loop at {loop.location}, all of whose iterations were "
        f"traced into one graph ({loop.evidence['repeats']} identical copies): {how}, as the "
        "unrolled_loop finding says. One iteration's graph then compiles once, whatever the "
        "number of iterations."
    )
