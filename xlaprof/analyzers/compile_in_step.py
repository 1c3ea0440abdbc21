"""Compilation inside training steps, from a capture: a steady step that compiled.

From a capture without a run directory's step records (those are read by ``recompilation``):
per device, its steady steps (``shared.bottlenecks``: the first and last of more than five
left out, as XProf does) whose ``compilation_s`` is not zero: the device idled while its host
compiled (XLA's or JAX's compile spans) or ran the GPU compiler's autotuning kernels. As in
``recompilation``, any compile after warm-up is a finding, whatever its length: steady steps
should replay compiled programs. Its share of those steps' time sets the severity.
"""

from __future__ import annotations

from xlaprof.analyzers.shared.bottlenecks import (
    class_shares,
    evidence,
    top_lines,
    trace_unmeasured,
)
from xlaprof.analyzers.shared.host_steps import after_warmup, host_unmeasured
from xlaprof.findings import Finding, Kind, Location, Severity
from xlaprof.model.input import AnalysisInput

# Compilation taking at least this share of the steady steps' time is a warning (XProf's
# input-bound threshold, applied to this other cause of device idle: 10% of step time).
COMPILE_WARNING_SHARE = 0.10

FIX = (
    "Find what changes between steps and keep it fixed: input shapes (pad or bucket batch and "
    "sequence lengths; drop_last=True), Python values baked into the program (pass them as "
    "arrays), static arguments; warm up every shape before timing; enable the persistent "
    "compilation cache (jax.config.update('jax_compilation_cache_dir', ...), "
    "torch_xla.runtime.initialize_cache) so restarts do not compile again."
)


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not judge ``data``: a run directory's own compile records (the
    ``recompilation`` analyzer reads those), no capture with device steps nor one of host
    steps without devices, or None."""
    if data.steps:
        return "a run directory's compiles are judged by recompilation, from its step records"
    reason = trace_unmeasured(data)
    if reason is not None and host_unmeasured(data) is None:
        return None
    return reason


def analyze(data: AnalysisInput) -> list[Finding]:
    if unmeasured(data) is not None:
        return []
    if trace_unmeasured(data) is not None:
        return _from_host(data)
    shares = [s for s in class_shares(data, ("compilation",)) if s.steps and s.seconds > 0]
    if not shares:
        return []
    shares.sort(key=lambda s: -s.seconds)
    top = shares[0]
    steps = _compiling_steps(data, top.host, top.device)
    proof = evidence(shares, "any compilation in a steady step")
    proof["compiling_steps_seconds"] = steps
    lines = top_lines(data, None)  # where the device's own time goes, for context
    if lines:
        proof["top_device_lines"] = lines
    severity = Severity.WARNING if top.share >= COMPILE_WARNING_SHARE else Severity.INFO
    listed = ", ".join(str(step) for step in list(steps)[:5])
    return [
        Finding(
            kind=Kind.COMPILE_IN_STEP,
            severity=severity,
            title=(
                f"Compiled during training: step{'s' if len(steps) > 1 else ''} {listed} on "
                f"{top.device} spent {top.seconds * 1e3:.1f} ms compiling, {top.share:.0%} of "
                f"the {top.steps} steady steps' time"
            ),
            evidence=proof,
            suggestion=FIX,
        )
    ]


def _compiling_steps(data: AnalysisInput, host: str, device: str) -> dict[int, float]:
    from xlaprof.tables.device.bottleneck import steady_steps

    assert data.trace is not None
    table = data.trace.bottlenecks(hosts=[host])  # a pod reads that host's rows only
    mine = table[(table["host"].astype(str) == host) & (table["device"].astype(str) == device)]
    steps = steady_steps(mine)
    steps = steps[steps["compilation_s"] > 0]
    return {
        int(step): round(float(seconds), 6)
        for step, seconds in zip(steps["step"], steps["compilation_s"], strict=True)
    }


def _from_host(data: AnalysisInput) -> list[Finding]:
    """A capture without device planes: steps after warm-up in which the host compiled
    (compile spans on its stepping thread), with the TORCH_TRACE compiles placed there."""
    steps = after_warmup(data)
    if steps.empty or steps["compile_ms"].isna().all():
        return []
    compiling = steps[steps["compile_ms"].fillna(0) > 0]
    if compiling.empty:
        return []
    assert data.host_activity is not None
    share = float(compiling["compile_ms"].sum() / steps["wall_ms"].sum())
    per_step = {
        int(step): round(float(ms), 3)
        for step, ms in zip(compiling["step"], compiling["compile_ms"], strict=True)
    }
    proof: dict[str, object] = {
        "compiling_steps_ms": dict(list(per_step.items())[:10]),
        "compile_share_after_warmup": round(share, 4),
        "steps_after_warmup": len(steps),
        "device_planes": "none in this capture: compile spans on the host's stepping thread",
        "steps_from": data.host_activity.source,
    }
    logged = [r for r in data.dynamo if r.kind == "recompile" and r.step in per_step]
    location = None
    if logged:  # the TORCH_TRACE log of the same run says what compiled and why
        proof["torch_compiles"] = [
            f"{r.compile_id} {r.function} at step {r.step}: {r.reason}" for r in logged[:5]
        ]
        frames = logged[0].user_frames
        location = Location.parse(frames[0]) if frames else None
    severity = Severity.WARNING if share >= COMPILE_WARNING_SHARE else Severity.INFO
    listed = ", ".join(str(step) for step in list(per_step)[:5])
    total_ms = sum(per_step.values())
    return [
        Finding(
            kind=Kind.COMPILE_IN_STEP,
            severity=severity,
            title=(
                f"Compiled during training: step{'s' if len(per_step) > 1 else ''} {listed} "
                f"spent {total_ms:.1f} ms compiling on the host, {share:.0%} of the "
                f"{len(steps)} steps after warm-up"
            ),
            evidence=proof,
            location=location,
            suggestion=FIX,
        )
    ]
