"""Host-bound: the device idles while its host does something other than input or compile.

From a capture: per device, the share of its steady steps' wall time in ``host_s``
(``xlaprof.tables.device.bottleneck``): device idle time that no data-input span, compile span
or torch_xla lazy tracing explains (Python between steps, op dispatch, kernel launches, a
``time.sleep``). A torch_xla capture's idle time is lazy tracing, judged by ``tracing_bound``.

Threshold: XProf's overview page highlights device time idle for "All Others" (host work that
is neither input nor compile) from 3% and calls it high from 15%
(``xprof/convert/op_stats_to_input_pipeline_analysis.cc``); this reports from 15%, and warns
from 50%, where idle time is at least the device's busy time (``tracing.HOST_BOUND_RATIO``).
"""

from __future__ import annotations

from xlaprof.analyzers.shared.bottlenecks import (
    class_shares,
    evidence,
    top_lines,
    trace_unmeasured,
    worst,
)
from xlaprof.findings import Finding, Kind, Severity
from xlaprof.model.input import AnalysisInput

# Device idle on the host's other work at least this share of step time (XProf: "high" 15%).
HOST_BOUND_SHARE = 0.15
# From this share on, a warning: the device idles as long as it works (HOST_BOUND_RATIO).
HOST_BOUND_WARNING_SHARE = 0.50

FIX = (
    "Keep the device fed: dispatch the next step before waiting on this one (no .item(), "
    "print or float() of device values each step; log every N steps), run several steps per "
    "dispatch (jax.lax.scan / fori_loop over micro-steps, torch_xla.compile of the whole "
    "step, CUDA graphs), make each step bigger (batch size) so launch cost is amortised, and "
    "look at the host's own timeline between device steps for the Python that runs there."
)


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not judge ``data``: no capture with device steps, or None."""
    return trace_unmeasured(data)


def analyze(data: AnalysisInput) -> list[Finding]:
    over = worst(class_shares(data, ("host",)), HOST_BOUND_SHARE)
    if not over:
        return []
    top = over[0]
    proof = evidence(over, f"device idle on the host >= {HOST_BOUND_SHARE:.0%} of step time")
    lines = top_lines(data, None)  # where the device's own time goes, for context
    if lines:
        proof["top_device_lines"] = lines
    stepped = top.steps > 0
    severity = (
        Severity.WARNING if stepped and top.share >= HOST_BOUND_WARNING_SHARE else Severity.INFO
    )
    what = "of its step time" if stepped else "between its first and last op"
    return [
        Finding(
            kind=Kind.HOST_BOUND,
            severity=severity,
            title=(
                f"Host-bound: {top.device} idles {top.share:.0%} {what}, waiting on host work "
                f"that is neither input nor compilation ({top.window})"
            ),
            evidence=proof,
            suggestion=FIX,
        )
    ]
