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

import re

from xlaprof.analyzers.shared.bottlenecks import (
    class_shares,
    evidence,
    top_lines,
    trace_unmeasured,
    worst,
)
from xlaprof.analyzers.shared.host_steps import host_unmeasured, steady
from xlaprof.findings import Finding, Kind, Location, Severity
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
    """Why this analyzer could not judge ``data``: no capture with device steps, nor one of
    host steps without devices that tells Python from aten ops, or None."""
    reason = trace_unmeasured(data)
    if reason is not None and host_unmeasured(data) is None:
        return _python_unmeasured(data)
    return reason


def _python_unmeasured(data: AnalysisInput) -> str | None:
    assert data.host_activity is not None
    steps = data.host_activity.steps
    if steps["python_ms"].isna().all() or steps["aten_ms"].isna().all():
        return (
            "the capture has no device and not both Python-tracer and aten events: Python "
            "time cannot be told from the ops it calls"
        )
    return None


def analyze(data: AnalysisInput) -> list[Finding]:
    if trace_unmeasured(data) is not None:
        if host_unmeasured(data) is None and _python_unmeasured(data) is None:
            return _from_host(data)
        return []
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


# Without device planes: Python (outside aten ops) at least this share of the steady steps'
# host time bounds the step rate by the host's Python (the device is not in the capture).
HOST_PYTHON_SHARE = 0.50

PYTHON_FIX = (
    "Take the Python off the step's path: do the work with tensor ops (vectorized), move data "
    "preparation into DataLoader workers (num_workers > 0) so it overlaps the step, or compute "
    "it once and reuse it; the hottest function is named in the evidence."
)
# Python-function event names: Kineto's ``file.py(19): fn`` and the XSpace tracer's
# ``$file.py:19 fn``
_KINETO_FRAME = re.compile(r"^(\S+\.py)\((\d+)\): (.+)$")
_XSPACE_FRAME = re.compile(r"^\$(\S+\.py):(\d+) (.+)$")


def _from_host(data: AnalysisInput) -> list[Finding]:
    """A capture without device planes: steady steps whose host time is mostly Python outside
    aten ops, with the hottest user function where the capture names it."""
    from xlaprof.parse.frames import is_library_file

    assert data.host_activity is not None
    steps = steady(data)
    if steps.empty:
        return []
    share = float(steps["python_ms"].fillna(0).sum() / steps["wall_ms"].sum())
    if share < HOST_PYTHON_SHARE:
        return []
    hot = data.host_activity.hot
    hot = hot[(hot["kind"] == "python") & hot["step"].isin(steps["step"])]
    totals = hot.groupby("name")["self_ms"].sum().sort_values(ascending=False)
    functions = {str(n): round(float(ms) / len(steps), 3) for n, ms in totals.head(5).items()}
    location = None
    for name in totals.index:
        match = _KINETO_FRAME.match(str(name)) or _XSPACE_FRAME.match(str(name))
        if match is not None and not is_library_file(match.group(1)):
            location = Location(match.group(1), int(match.group(2)))
            break
    median_python = float(steps["python_ms"].median())
    median_wall = float(steps["wall_ms"].median())
    return [
        Finding(
            kind=Kind.HOST_BOUND,
            severity=Severity.INFO,
            title=(
                f"Host-bound in Python: {share:.0%} of the {len(steps)} steady steps' host "
                f"time is Python outside aten ops ({median_python:.1f} ms of a "
                f"{median_wall:.1f} ms step, median)"
            ),
            evidence={
                "python_share": round(share, 4),
                "median_python_ms": round(median_python, 3),
                "median_step_ms": round(median_wall, 3),
                "hottest_python_ms_per_step": functions,
                "device_planes": "none in this capture: the host's Python bounds the step "
                "rate; whether a device waited is not measured",
                "steps_from": data.host_activity.source,
            },
            location=location,
            suggestion=PYTHON_FIX,
        )
    ]
