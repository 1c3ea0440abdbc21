"""Collective-bound: collectives take 30% of the step or more.

From a capture: per device, the share of its steady steps' wall time in collectives
(``collective_s`` of ``xlaprof.tables.device.bottleneck``: all-reduce, all-gather,
reduce-scatter, NCCL/RCCL kernels; time they overlap compute counts as collective).

Threshold: XProf's smart-suggestion collective-bound rule, 30% of step time on average
(``kCollectiveBoundThresholdInPercent``, openxla/xprof
``xprof/convert/smart_suggestion/constants.h``, ``collective_bound_rule.h``).
"""

from __future__ import annotations

from xlaprof.analyzers.shared.bottlenecks import (
    class_shares,
    evidence,
    line_location,
    no_line_reason,
    top_lines,
    trace_unmeasured,
    worst,
)
from xlaprof.findings import Finding, Kind, Severity
from xlaprof.model.input import AnalysisInput

# Collectives at least this share of step time (XProf: 30%).
COLLECTIVE_BOUND_SHARE = 0.30
# From this share on, a warning: the devices spend more time communicating than anything else.
COLLECTIVE_BOUND_WARNING_SHARE = 0.50

FIX = (
    "Overlap communication with compute (XLA's latency-hiding scheduler and async "
    "collectives; on GPU XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true); "
    "communicate less per step: larger per-device batches, gradient accumulation before the "
    "all-reduce, bf16 gradients, a sharding that keeps the large tensors local (FSDP vs data "
    "parallel); check that the collective runs over the fast interconnect (ICI/NVLink), not "
    "the data-centre network."
)


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not judge ``data``: no capture with device steps, or None."""
    return trace_unmeasured(data)


def analyze(data: AnalysisInput) -> list[Finding]:
    over = worst(class_shares(data, ("collective",)), COLLECTIVE_BOUND_SHARE)
    if not over:
        return []
    top = over[0]
    proof = evidence(
        over, f"collectives >= {COLLECTIVE_BOUND_SHARE:.0%} of step time (XProf's rule)"
    )
    lines = top_lines(data, "collective")
    if lines:
        proof["top_device_lines"] = lines
    location = line_location(lines)
    if location is None:
        proof["source_line"] = no_line_reason(lines, "the collectives")
    severity = Severity.WARNING if top.share >= COLLECTIVE_BOUND_WARNING_SHARE else Severity.INFO
    return [
        Finding(
            kind=Kind.COLLECTIVE_BOUND,
            severity=severity,
            title=(
                f"Collective-bound: {top.device} spends {top.share:.0%} of its step time in "
                f"collectives ({top.window})"
            ),
            evidence=proof,
            location=location,
            suggestion=FIX,
        )
    ]
