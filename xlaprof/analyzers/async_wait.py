"""Async waits: the device stalls on asynchronous copies (host offload) a tenth of the step.

From a capture: per device, the share of its steady steps' wall time in ``async_wait_s``
(``xlaprof.tables.device.bottleneck``): the ``*-done`` half of async pairs and host-offload
transfers (TPU copies to or from host memory, S(5); host send/recv), the time the chip sat
waiting for a transfer to land. The start of a pair takes nanoseconds; its done is the wait.

Threshold: XProf's smart-suggestion async-done rule, 10% of step time
(``kAsyncDoneThresholdInPercent``, openxla/xprof
``xprof/convert/smart_suggestion/constants.h``).
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

# Waiting on async transfers at least this share of step time (XProf: 10%).
ASYNC_WAIT_SHARE = 0.10
# From this share on, a warning: the transfers, not the compute, set the step time.
ASYNC_WAIT_WARNING_SHARE = 0.50

FIX = (
    "Give the transfers compute to hide behind: start the copy earlier (prefetch offloaded "
    "activations or optimizer state a layer ahead), move less (offload only what does not "
    "fit in HBM; keep small or hot tensors on device; bf16 instead of f32), or keep the "
    "tensors in device memory when they fit (drop the host-offload memory kind or "
    "activation offloading policy)."
)


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not judge ``data``: no capture with device steps, or None."""
    return trace_unmeasured(data)


def analyze(data: AnalysisInput) -> list[Finding]:
    over = worst(class_shares(data, ("async_wait",)), ASYNC_WAIT_SHARE)
    if not over:
        return []
    top = over[0]
    proof = evidence(over, f"async waits >= {ASYNC_WAIT_SHARE:.0%} of step time (XProf's rule)")
    ops = _top_waits(data, top.host, top.device)
    if ops:
        proof["top_wait_ops"] = ops
    lines = top_lines(data, "async_wait")
    if lines:
        proof["top_device_lines"] = lines
    location = line_location(lines)
    if location is None:
        proof["source_line"] = no_line_reason(lines, "the waits")
    severity = Severity.WARNING if top.share >= ASYNC_WAIT_WARNING_SHARE else Severity.INFO
    return [
        Finding(
            kind=Kind.ASYNC_WAIT,
            severity=severity,
            title=(
                f"Waiting on async copies: {top.device} stalls {top.share:.0%} of its step "
                f"time until transfers land ({top.window})"
            ),
            evidence=proof,
            location=location,
            suggestion=FIX,
        )
    ]


def _top_waits(data: AnalysisInput, host: str, device: str) -> dict[str, dict[str, object]]:
    """The device's waiting ops with the most self time: its seconds, rate and pair span."""
    if data.trace is None:
        return {}
    ops = data.trace.device_ops()
    names = ops["name"].astype(str)
    waiting = (ops["category"] == "host_offload") | names.str.contains(
        r"-done(?:\.\d+)?$", regex=True
    )
    mine = ops[(ops["host"].astype(str) == host) & (ops["device"].astype(str) == device) & waiting]
    top = mine.sort_values("self_s", ascending=False).head(3)
    found: dict[str, dict[str, object]] = {}
    for name, self_s, rate, span in top[["name", "self_s", "bytes_per_s", "async_s"]].itertuples(
        index=False, name=None
    ):
        found[str(name)] = {
            "seconds": round(float(self_s), 6),
            "bytes_per_s": None if rate != rate else float(rate),
            "pair_span_seconds": None if span is None or span != span else round(float(span), 6),
        }
    return found
