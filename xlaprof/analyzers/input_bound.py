"""Input-bound: the device waits for its data a tenth of the step or more.

From a capture (``AnalysisInput.trace``): per device, the share of its steady steps' wall time
(``shared.bottlenecks``) in the per-step bottleneck classes about input
(``xlaprof.tables.device.bottleneck``): device idle while its host was in a data-input span
(``input_s``: tf.data's iterator, a DataLoader, a function named like ``load_batch``),
host-to-device copies (``input_transfer_s``: ``MemcpyH2D``/``D2H``) and TPU infeed/outfeed.

Thresholds are XProf's: its smart-suggestion input-bound rule fires above 10% of step time
(``kInfeedPercentageThreshold``, openxla/xprof ``xprof/convert/smart_suggestion/constants.h``),
and its overview page calls a step "highly input-bound" from 20%
(``xprof/convert/op_stats_to_input_pipeline_analysis.cc``).
"""

from __future__ import annotations

from xlaprof.analyzers.shared.bottlenecks import (
    class_shares,
    evidence,
    host_spans,
    top_lines,
    trace_unmeasured,
    worst,
)
from xlaprof.findings import Finding, Kind, Severity
from xlaprof.model.input import AnalysisInput

# A device whose steps spend at least this share waiting on input is input-bound (XProf: 10%).
INPUT_BOUND_SHARE = 0.10
# From this share on, a warning (XProf's "highly input-bound": 20%).
INPUT_BOUND_WARNING_SHARE = 0.20
CLASSES = ("input", "input_transfer", "infeed_outfeed")

FIX = (
    "Overlap input with compute: prefetch the next batches while the device runs "
    "(torch_xla: MpDeviceLoader / ParallelLoader with a prefetch depth; tf.data: "
    ".prefetch(tf.data.AUTOTUNE); PyTorch: DataLoader(num_workers>0, pin_memory=True, "
    "prefetch_factor)); move decoding and augmentation off the training thread or onto the "
    "device; read from local or cached storage rather than per step."
)


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not judge ``data``: no capture with device steps, or None."""
    return trace_unmeasured(data)


def analyze(data: AnalysisInput) -> list[Finding]:
    from xlaprof.tables.device.bottleneck import INPUT_EVENT

    over = worst(class_shares(data, CLASSES), INPUT_BOUND_SHARE)
    if not over:
        return []
    top = over[0]
    proof = evidence(over, f"input >= {INPUT_BOUND_SHARE:.0%} of step time (XProf's rule)")
    spans = host_spans(data, INPUT_EVENT, {top.host})
    if spans:
        proof["input_spans_seconds"] = spans
    lines = top_lines(data, "input_transfer") or top_lines(data, None)
    if lines:
        proof["top_device_lines"] = lines
    severity = Severity.WARNING if top.share >= INPUT_BOUND_WARNING_SHARE else Severity.INFO
    return [
        Finding(
            kind=Kind.INPUT_BOUND,
            severity=severity,
            title=(
                f"Input-bound: {top.device} waits for input {top.share:.0%} of its step time "
                f"({top.window})"
            ),
            evidence=proof,
            suggestion=FIX,
        )
    ]
