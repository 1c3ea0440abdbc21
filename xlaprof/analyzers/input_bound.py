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
from xlaprof.analyzers.shared.host_steps import host_unmeasured, steady
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
    """Why this analyzer could not judge ``data``: no capture with device steps, nor one of
    host steps without devices, or None."""
    reason = trace_unmeasured(data)
    if reason is not None and host_unmeasured(data) is None:
        return None
    return reason


def analyze(data: AnalysisInput) -> list[Finding]:
    from xlaprof.tables.device.bottleneck import INPUT_EVENT

    if trace_unmeasured(data) is not None:
        return _from_host(data) if host_unmeasured(data) is None else []
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


# Of the steady steps, at least this share must wait on a read for "each step" to be said.
EACH_STEP_SHARE = 0.8


def _from_host(data: AnalysisInput) -> list[Finding]:
    """A capture without device planes: steady steps whose host waits on a read (a
    DataLoader's ``__next__``) for a tenth of the step or more, in most steps."""
    from xlaprof.tables.host_steps import read_spans

    steps = steady(data)
    if steps.empty or steps["read_ms"].isna().all():
        return []
    reading = steps[steps["read_ms"].fillna(0) > 0]
    share = float(steps["read_ms"].fillna(0).sum() / steps["wall_ms"].sum())
    if share < INPUT_BOUND_SHARE or len(reading) < EACH_STEP_SHARE * len(steps):
        return []
    assert data.trace is not None and data.host_activity is not None
    median_read = float(steps["read_ms"].median())
    median_wall = float(steps["wall_ms"].median())
    proof: dict[str, object] = {
        "steady_steps": len(steps),
        "steps_reading": len(reading),
        "read_share": round(share, 4),
        "median_read_ms": round(median_read, 3),
        "median_step_ms": round(median_wall, 3),
        "read_spans": read_spans(data.trace.events, set(steps["step"].tolist())),
        "device_planes": "none in this capture: the share is of the host's step time",
        "steps_from": data.host_activity.source,
    }
    severity = Severity.WARNING if share >= INPUT_BOUND_WARNING_SHARE else Severity.INFO
    return [
        Finding(
            kind=Kind.INPUT_BOUND,
            severity=severity,
            title=(
                f"Input-bound: {len(reading)} of {len(steps)} steady steps wait on a read, "
                f"{median_read:.1f} ms of a {median_wall:.1f} ms step (median; {share:.0%} of "
                "their time)"
            ),
            evidence=proof,
            suggestion=FIX,
        )
    ]
