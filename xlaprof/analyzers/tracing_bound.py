"""Tracing-bound: the device idles a large share of each step, waiting for the host to trace.

On an XLA device the host records every op (lazy tracing) and the device runs the compiled
graph asynchronously. When host time per step exceeds the device time by a margin, the device
waits on the host and adding device speed buys nothing.

The verdict needs both margins (named below): host time at least ``HOST_TO_DEVICE_MIN_RATIO``
times the device time, and the device idle for at least ``DEVICE_IDLE_MIN_SHARE`` of the step's
wall time. The ratio alone is not enough: near 1 it flips with noise and with ExecuteTime's
queueing, and a device busy most of the step gains little from faster tracing. Severity follows
the idle share. The finding is placed where the host CPU goes (the sampler's top user line),
not at the sync line that ends the step.

Reads (run directories): steady-state steps (after warm-up, without compiles) and their host
CPU time (the CPU the stepping thread used: time blocked waiting for the device uses none, so it
is not counted as host work); the sampler's CPU time per user source line (the lines that
dominate host work); user regions; per-step counts of lowered ops; and device time per
execution from the ``ExecuteTime`` metric. On asynchronous runtimes
ExecuteTime can include time queued behind earlier executions, so it can overstate device time:
the verdict then errs toward *not* calling a step tracing-bound.

From a capture alone (no run steps, ``AnalysisInput.trace`` set): where the host lines show
torch_xla's lazy-tensor runtime, the same verdict with the same thresholds, read from the
trace's per-step table (``Trace.tracing_vs_device()``): host time is the step's wall time minus
the runtime's own work on its main line (lazy tracing and user Python), device time the
busiest device's busy time in the step, over the steady steps (the first and last of more than
five left out, as XProf does).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from typing import Any

from xlaprof.analyzers.shared.sourcecode import source_line
from xlaprof.findings import Finding, Kind, Location, Severity
from xlaprof.model.input import EXECUTE_METRICS, AnalysisInput
from xlaprof.parse.frames import is_library_file

# Host time per step must be at least this many times the device time per step ...
HOST_TO_DEVICE_MIN_RATIO = 1.5
# ... and the device idle (wall - device time) at least this share of the step's wall time.
DEVICE_IDLE_MIN_SHARE = 0.30
# From this idle share on, a warning rather than a note.
DEVICE_IDLE_WARNING_SHARE = 0.50
# Lines that end a step: host time charged there is graph building, not the user's ops.
_STEP_END_CALLS = ("sync(", "mark_step(", "optimizer_step(")
# Fewer steady steps than this give no verdict.
MIN_STEADY_STEPS = 3
LIBRARY = "<library>"
_TOP = 5

FIXES = (
    "Trace less per step: fewer Python-level ops (vectorize per-element loops, batch small "
    "tensors into big ones); compile the step once with torch_xla.compile(fn) or "
    "torch.compile(backend='openxla') so later steps replay without tracing; mark pure "
    "functions with torch_xla.experimental.assume_pure; for repeated layers use scan_layers "
    "with is_layer_pure=True (its tracing cache); feed inputs through MpDeviceLoader so "
    "host-to-device copies overlap compute."
)


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not judge ``data``: fewer than ``MIN_STEADY_STEPS`` steady steps
    (after warm-up, without compiling) in the run and in the capture's lazy-tensor steps, or
    None."""
    steady = [s for s in data.steps if s.step >= data.warmup_steps and s.compiles == 0]
    if len(steady) >= MIN_STEADY_STEPS:
        return None
    if not data.steps and len(_traced_steps(data)["tracing_s"]) >= MIN_STEADY_STEPS:
        return None
    return (
        f"needs {MIN_STEADY_STEPS} steady steps (after warm-up, without compiling); "
        f"the run has {len(steady)}"
    )


def analyze(data: AnalysisInput) -> list[Finding]:
    steady = [
        s
        for s in data.steps
        if s.step >= data.warmup_steps and s.compiles == 0 and s.wall_s is not None
    ]
    if len(steady) < MIN_STEADY_STEPS:
        return [] if data.steps else _from_trace(data)
    device_s = _device_seconds_per_step(data, len(data.steps))
    if not device_s:
        return []
    wall = statistics.median(s.wall_s or 0.0 for s in steady)
    lazy_tracing = statistics.median(s.tracing_s for s in steady)
    cpu = [s.host_cpu_s for s in steady if s.host_cpu_s is not None]
    if len(cpu) == len(steady):
        host_s = statistics.median(cpu)
        host_basis = "median CPU time of the host thread per step (waits excluded)"
    else:
        host_s = lazy_tracing
        host_basis = "LazyTracing metric (a lower bound: no host CPU time recorded)"
    where: Counter[str] = Counter()
    for step in steady:
        where.update(data.host_samples.get(step.step, {}))
    sampled = sum(where.values())
    ratio = host_s / device_s
    idle = min(max(1.0 - device_s / wall, 0.0), 1.0) if wall > 0 else 0.0
    if ratio < HOST_TO_DEVICE_MIN_RATIO or idle < DEVICE_IDLE_MIN_SHARE:
        return []
    evidence: dict[str, object] = {
        "steady_steps": len(steady),
        "host_seconds_per_step": round(host_s, 6),
        "host_basis": host_basis,
        "device_seconds_per_step": round(device_s, 6),
        "device_basis": "median ExecuteTime per execution x executions per step",
        "host_to_device_ratio": round(ratio, 3),
        "median_step_wall_seconds": round(wall, 6),
        "device_idle_share": round(idle, 3),
        "thresholds": (
            f"host >= {HOST_TO_DEVICE_MIN_RATIO}x device and device idle >= "
            f"{DEVICE_IDLE_MIN_SHARE:.0%} of the step"
        ),
        "lazy_tracing_seconds_per_step": round(lazy_tracing, 6),
    }
    in_sync = [s.sync_cpu_s for s in steady if s.sync_cpu_s is not None]
    if len(in_sync) == len(steady):  # recorded with host_cpu_s, so host_s is its median
        # The sync's share: graph building and, under xlaprof run, PT_XLA_DEBUG's analysis of
        # each execution (its cost, not the user's, sits here; see docs/analyzers).
        evidence["host_seconds_in_sync_per_step"] = round(statistics.median(in_sync), 6)
    ops = [s.ops for s in steady if s.ops is not None]
    if ops:
        evidence["ops_traced_per_step"] = int(statistics.median(ops))
    lines = [
        (line, n)
        for line, n in where.most_common()
        if line != LIBRARY and not is_library_file(line.rpartition(":")[0])
    ][:_TOP]
    if lines:
        # share of the host thread's sampled CPU time spent with this line innermost
        evidence["top_host_lines_cpu_share"] = {line: round(n / sampled, 3) for line, n in lines}
    regions = _top_regions(data, {s.step for s in steady})
    if regions:
        evidence["top_regions_seconds_per_step"] = regions
    evidence["cxx11_abi"] = data.cxx11_abi
    location = _work_location([line for line, _n in lines])
    severity = Severity.WARNING if idle >= DEVICE_IDLE_WARNING_SHARE else Severity.INFO
    return [
        Finding(
            kind=Kind.TRACING_BOUND,
            severity=severity,
            title=(
                f"Tracing-bound: the host needs {host_s * 1e3:.2f} ms per step, {ratio:.1f}x "
                f"the device's {device_s * 1e3:.2f} ms; the device idles {idle:.0%} of the step"
            ),
            evidence=evidence,
            location=location,
            suggestion=FIXES + " " + _abi_note(data.cxx11_abi),
        )
    ]


def _traced_steps(data: AnalysisInput) -> dict[str, Any]:
    """The capture's steady host steps with lazy-tensor tracing measured (``tracing`` rows):
    their ``tracing_s``, ``device_busy_s`` and ``host_wall_s``, as arrays. Read host by host
    (a pod's from each host's file), keeping only those three numbers a step."""
    import numpy as np

    columns = ("tracing_s", "device_busy_s", "host_wall_s")
    found: dict[str, list[Any]] = {name: [] for name in columns}
    if data.trace is None or data.trace.device_summary is None:
        return {name: np.zeros(0) for name in columns}
    for host in data.trace.hosts:
        table = data.trace.tracing_vs_device(hosts=[host])
        if table.empty:
            continue
        lazy = table[
            table["lazy_tensor"].fillna(False).astype(bool)
            & table["tracing_s"].notna()
            & table["device_busy_s"].notna()
        ]
        for _, group in lazy.groupby("host", observed=True, sort=True):
            group = group.sort_values("step")
            if len(group) > _EDGE_STEPS:  # a capture starts and stops mid-step (XProf's rule)
                group = group.iloc[1:-1]
            for name in columns:
                found[name].append(group[name].to_numpy(dtype=np.float64))
    return {name: np.concatenate(parts) if parts else np.zeros(0) for name, parts in found.items()}


# XProf leaves out a capture's first and last step when it has more than this many.
_EDGE_STEPS = 5


def _from_trace(data: AnalysisInput) -> list[Finding]:
    """The tracing-bound verdict from a capture's lazy-tensor steps (module docstring)."""
    import numpy as np

    steps = _traced_steps(data)
    count = len(steps["tracing_s"])
    if count < MIN_STEADY_STEPS:
        return []
    # medians as statistics.median takes them (the mean of the two middle values), in numpy
    host_s = float(np.median(steps["tracing_s"]))
    device_s = float(np.median(steps["device_busy_s"]))
    wall = float(np.median(steps["host_wall_s"]))
    if device_s <= 0 or wall <= 0:
        return []
    ratio = host_s / device_s
    idle = min(max(1.0 - device_s / wall, 0.0), 1.0)
    if ratio < HOST_TO_DEVICE_MIN_RATIO or idle < DEVICE_IDLE_MIN_SHARE:
        return []
    evidence: dict[str, object] = {
        "steady_steps": count,
        "host_seconds_per_step": round(host_s, 6),
        "host_basis": (
            "median step wall time minus the lazy-tensor runtime's own work on its main line "
            "(from the capture)"
        ),
        "device_seconds_per_step": round(device_s, 6),
        "device_basis": "median busy time of the busiest device per step (from the capture)",
        "host_to_device_ratio": round(ratio, 3),
        "median_step_wall_seconds": round(wall, 6),
        "device_idle_share": round(idle, 3),
        "thresholds": (
            f"host >= {HOST_TO_DEVICE_MIN_RATIO}x device and device idle >= "
            f"{DEVICE_IDLE_MIN_SHARE:.0%} of the step"
        ),
    }
    severity = Severity.WARNING if idle >= DEVICE_IDLE_WARNING_SHARE else Severity.INFO
    return [
        Finding(
            kind=Kind.TRACING_BOUND,
            severity=severity,
            title=(
                f"Tracing-bound: the host needs {host_s * 1e3:.2f} ms per step, {ratio:.1f}x "
                f"the device's {device_s * 1e3:.2f} ms; the device idles {idle:.0%} of the step"
            ),
            evidence=evidence,
            suggestion=FIXES + " " + _abi_note(data.cxx11_abi),
        )
    ]


def _device_seconds_per_step(data: AnalysisInput, steps: int) -> float | None:
    for report in reversed(data.reports):
        for name in EXECUTE_METRICS:
            metric = report.metrics.get(name)
            if metric is None or not metric.total_samples:
                continue
            per_execution = metric.percentiles.get(50.0)
            if per_execution is None and metric.accumulator is not None:
                per_execution = metric.accumulator / metric.total_samples
            if per_execution is None:
                continue
            executions_per_step = metric.total_samples / max(steps, 1)
            return per_execution * max(executions_per_step, 1.0)
    executions = sum(s.executions for s in data.steps)
    if executions:
        return sum(s.execute_s for s in data.steps) / max(len(data.steps), 1)
    return None


def _top_regions(data: AnalysisInput, steps: set[int]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for region in data.regions:
        if region.step in steps:
            totals[region.name] += region.seconds
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:_TOP]
    return {name: round(seconds / len(steps), 6) for name, seconds in ranked}


def _work_location(lines: list[str]) -> Location | None:
    """The top sampled line that is not a step-ending call (where tracing work is written)."""
    located = [loc for loc in map(_location, lines) if loc is not None]
    for location in located:
        text = source_line(location.file, location.line) or ""
        if not any(call in text for call in _STEP_END_CALLS):
            return location
    return located[0] if located else None


def _location(where: str) -> Location | None:
    file, _, line = where.rpartition(":")
    return Location(file, int(line)) if line.isdigit() else None


def _abi_note(cxx11_abi: bool | None) -> str:
    if cxx11_abi is True:
        return "The installed torch is already a C++11-ABI build."
    if cxx11_abi is False:
        return (
            "The installed torch is a pre-C++11-ABI build: PyTorch/XLA's README (2.6) says its "
            "C++11-ABI wheels have better lazy tensor tracing performance, and they are the "
            "default from 2.7 on."
        )
    return (
        "Check whether torch and torch_xla are C++11-ABI builds (torch._C._GLIBCXX_USE_CXX11_ABI)."
    )
