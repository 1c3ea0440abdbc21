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
dominate host work); user regions; per-step counts of lowered ops; and the step model's device
work and step time (``AnalysisInput.device``: each execution attributed to the step that
launched it, its own busy time with the queue left out, and the step's time in the run, which
holds its device work when the host runs ahead). The step timeline and the story read the same
figures. A run recorded by an older xlaprof has no executions: its device time is not measured
and this analyzer says nothing of it (``ExecuteTime`` holds the queue).

Where the tracing goes comes from the graphs when they were kept: the HLO metadata gives each
op its innermost source line, so the user line with the most ops in the steady steps' graph is
the line that makes the step large (a per-element loop), and is where the finding sits. Backward
and optimizer ops carry library lines (torch's decompositions) and place nothing; a sampler
would charge their tracing to ``loss.backward()``. Without graphs, the sampler's top line is
used. The fix is written from what the run used: ``torch_xla.compile`` (it syncs around the
step and traces every call all the same: its own run shows the tracing), a data loader
(``MpDeviceLoader``), ``torch.compile``, ``scan_layers``; what is in use is not advised again.

From a capture alone (no run steps, ``AnalysisInput.trace`` set): where the host lines show
torch_xla's lazy-tensor runtime, the same verdict with the same thresholds, read from the
trace's per-step table (``Trace.tracing_vs_device()``): host time is what the trace measured of
the stepping thread's own work (``host_busy_s``: the graph build at each sync, which grows with
the ops traced, host-to-device copies and dispatch; waits and compiles left out), never the
step's wall time less what the runtime did (that rest holds every wait the trace does not name,
and would call a device-bound loop tracing-bound). Untraced Python is not in it, so the host
time is a lower bound and the verdict errs toward *not* calling a step tracing-bound. Device
time is the busiest device's busy time in the step, over the steady steps (the first and last
of more than five left out, as XProf does).

The finding's cost (``Finding.cost``) is per step: the host time beyond the device's, which
the device idles through and a faster host would give back at most.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xlaprof.analyzers.shared.sourcecode import source_line
from xlaprof.findings import Cost, Finding, Kind, Location, Severity
from xlaprof.model.input import AnalysisInput
from xlaprof.model.sources import SourceFiles
from xlaprof.parse.frames import DYNAMO_DIR, LOADER_FILE, is_library_file
from xlaprof.rundir.executions import StepDevice
from xlaprof.rundir.schema import SAMPLE_LIBRARY, StepRow
from xlaprof.tables.device.bottleneck import EDGE_STEPS

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
_TOP = 5

# Op kinds that are no traced work of their own: graph inputs and literals.
_NOT_OPS = ("parameter", "constant")
# The execution causes and frames that name how a step was synced.
_COMPILE_CAUSE = "torch_xla.compile"
_LOADER_CAUSE = "parallel loader"
_SCAN_FILE = "torch_xla/experimental/scan"
# How a script spells what it uses, where its source may be read (a second witness when the
# run itself does not show it: a loader whose syncs ran no graph leaves no event).
_SOURCE_WORDS = {
    "compile": ("torch_xla.compile(",),
    "loader": ("MpDeviceLoader", "ParallelLoader"),
    "dynamo": ("torch.compile(",),
    "scan": ("scan_layers(",),
}

TRACE_LESS = (
    "Trace fewer ops per step: vectorize per-element Python loops, batch small tensors into big "
    "ones."
)
FIX_COMPILE_IN_USE = (
    " The step is already wrapped in torch_xla.compile: it syncs around the function and "
    "traces every call all the same, so it does not remove this cost."
)
FIX_DYNAMO = (
    " Or compile the function holding those ops with torch.compile(fn, backend='openxla'), "
    "leaving backward and the optimizer step outside it: dynamo traces it once and later calls "
    "run the cached graph without lazy tracing (while its guards hold)."
)
FIX_PURE = (
    " Mark pure functions with torch_xla.experimental.assume_pure; for repeated layers use "
    "scan_layers with is_layer_pure=True (its tracing cache)."
)
FIX_LOADER = " Feed inputs through MpDeviceLoader so host-to-device copies overlap compute."


@dataclass
class _InUse:
    """What the run shows the script already uses, each with how it is known."""

    compile: str | None = None
    loader: str | None = None
    dynamo: str | None = None
    scan: str | None = None

    def evidence(self) -> dict[str, str]:
        named = {
            "torch_xla.compile": self.compile,
            "MpDeviceLoader": self.loader,
            "torch.compile": self.dynamo,
            "scan_layers": self.scan,
        }
        return {name: how for name, how in named.items() if how is not None}


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not judge ``data``: fewer than ``MIN_STEADY_STEPS`` steady steps
    (after warm-up, without compiling) in the run and in the capture's lazy-tensor steps, or a
    run without the device's own time per step (recorded by an older xlaprof), or None."""
    first = data.first_steady_step()
    steady = [s for s in data.steps if s.step >= first and s.compiles == 0]
    if len(steady) >= MIN_STEADY_STEPS:
        if not _steady_device(data):
            return (
                "needs the device's own time per step (executions.jsonl), which this run "
                "did not record (an older xlaprof)"
            )
        return None
    if not data.steps:
        traced = len(_traced_steps(data)["host_busy_s"])
        if traced >= MIN_STEADY_STEPS:
            return None
        if data.trace is not None:  # a capture alone: its lazy-tensor steps are what counts
            return (
                f"needs {MIN_STEADY_STEPS} lazy-tensor steps with host and device busy time "
                f"(a capture's first and last left out); the capture has {traced}"
            )
    return (
        f"needs {MIN_STEADY_STEPS} steady steps (after warm-up, without compiling); "
        f"the run has {len(steady)}"
    )


def _steady_device(data: AnalysisInput) -> list[tuple[StepRow, StepDevice]]:
    """The run's steady steps (after warm-up, compiling nothing) with the step model's device
    figures for each: its time in the run and the device's own busy time (both measured)."""
    device = data.device
    if device is None:
        return []
    first = data.first_steady_step()
    return [
        (row, ran)
        for row, ran in zip(data.steps, device.steps, strict=True)
        if row.step >= first
        and row.compiles == 0
        and ran.time_s is not None
        and ran.device_s is not None
    ]


def analyze(data: AnalysisInput) -> list[Finding]:
    steady_device = _steady_device(data)
    steady = [row for row, _ in steady_device]
    if len(steady) < MIN_STEADY_STEPS:
        return [] if data.steps else _from_trace(data)
    device_s = statistics.median(ran.device_s or 0.0 for _, ran in steady_device)
    if not device_s:
        return []
    wall = statistics.median(ran.time_s or 0.0 for _, ran in steady_device)
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
        "device_basis": (
            "median over the steady steps of the device's own busy time running each step's "
            "executions (the run's executions: launch and completion, queue left out)"
        ),
        "host_to_device_ratio": round(ratio, 3),
        "median_step_wall_seconds": round(wall, 6),
        "step_time_basis": "median over the steady steps of each step's time in the run",
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
        if line != SAMPLE_LIBRARY and not is_library_file(line.rpartition(":")[0])
    ][:_TOP]
    if lines:
        # share of the host thread's sampled CPU time spent with this line innermost
        evidence["top_host_lines_cpu_share"] = {line: round(n / sampled, 3) for line, n in lines}
    regions = _top_regions(data, {s.step for s in steady})
    if regions:
        evidence["top_regions_seconds_per_step"] = regions
    evidence["cxx11_abi"] = data.cxx11_abi
    location, fix = _place_and_fix(data, {s.step for s in steady}, lines, evidence)
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
            suggestion=fix + " " + _abi_note(data.cxx11_abi),
            cost=_cost(host_s, device_s, len(steady)),
        )
    ]


def _traced_steps(data: AnalysisInput) -> dict[str, Any]:
    """The capture's steady host steps with the host's work measured (``tracing`` rows):
    their ``host_busy_s``, ``device_busy_s`` and ``host_wall_s``, as arrays. Read host by host
    (a pod's from each host's file), keeping only those three numbers a step."""
    import numpy as np

    columns = ("host_busy_s", "device_busy_s", "host_wall_s")
    found: dict[str, list[Any]] = {name: [] for name in columns}
    if data.trace is None or data.trace.device_summary is None:
        return {name: np.zeros(0) for name in columns}
    for host in data.trace.hosts:
        table = data.trace.tracing_vs_device(hosts=[host])
        if table.empty:
            continue
        lazy = table[
            table["lazy_tensor"].fillna(False).astype(bool)
            & table["host_busy_s"].notna()
            & table["device_busy_s"].notna()
        ]
        for _, group in lazy.groupby("host", observed=True, sort=True):
            group = group.sort_values("step")
            if len(group) > EDGE_STEPS:  # a capture starts and stops mid-step (XProf's rule)
                group = group.iloc[1:-1]
            for name in columns:
                found[name].append(group[name].to_numpy(dtype=np.float64))
    return {name: np.concatenate(parts) if parts else np.zeros(0) for name, parts in found.items()}


def _from_trace(data: AnalysisInput) -> list[Finding]:
    """The tracing-bound verdict from a capture's lazy-tensor steps (module docstring)."""
    import numpy as np

    steps = _traced_steps(data)
    count = len(steps["host_busy_s"])
    if count < MIN_STEADY_STEPS:
        return []
    # medians as statistics.median takes them (the mean of the two middle values), in numpy
    host_s = float(np.median(steps["host_busy_s"]))
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
            "median of the stepping thread's measured work in the capture (graph build at the "
            "sync, host-to-device copies, dispatch; waits and compiles left out): a lower bound"
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
            suggestion=_suggestion(data.sources, None, 0, _InUse())
            + " "
            + _abi_note(data.cxx11_abi),
            cost=_cost(host_s, device_s, count),
        )
    ]


def _cost(host_s: float, device_s: float, steps: int) -> Cost:
    """Per step, the host time beyond the device's: what the device idles through waiting for
    the host, and the most a faster host gives back."""
    per_step = max(host_s - device_s, 0.0)
    return Cost(
        per_step_s=per_step,
        run_s=per_step * steps,
        steps=steps,
        basis="host time per step less device time per step (the device idles through it)",
    )


def _top_regions(data: AnalysisInput, steps: set[int]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for region in data.regions:
        if region.step in steps:
            totals[region.name] += region.seconds
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:_TOP]
    return {name: round(seconds / len(steps), 6) for name, seconds in ranked}


def _place_and_fix(
    data: AnalysisInput,
    steady: set[int],
    sampled_lines: Sequence[tuple[str, float]],
    evidence: dict[str, object],
) -> tuple[Location | None, str]:
    """Where the finding sits and its fix: the user line making most of the steady graph's
    instructions (else the sampler's top line), and advice without what is already in use.
    Adds the graph's counts and what is in use to ``evidence``."""
    by_line, graph_ops = _traced_ops_by_line(data, steady)
    top_ops = [(loc, n) for loc, n in by_line.most_common() if not is_library_file(loc.file)]
    if top_ops:
        evidence["graph_ops"] = graph_ops
        evidence["graph_ops_by_user_line"] = {str(loc): n for loc, n in top_ops[:_TOP]}
    location = (
        top_ops[0][0]
        if top_ops
        else _work_location(data.sources, [line for line, _ in sampled_lines])
    )
    in_use = _in_use(data, location)
    if in_use.evidence():
        evidence["already_in_use"] = in_use.evidence()
    return location, _suggestion(data.sources, top_ops[0] if top_ops else None, graph_ops, in_use)


def _traced_ops_by_line(data: AnalysisInput, steady: set[int]) -> tuple[Counter[Location], int]:
    """Ops per source line (HLO metadata) in the graphs the steady steps ran, and their total.

    The graphs are those whose hash a steady step executed; without that link (no debug
    events), the largest graph kept. Empty when no graph was kept.
    """
    kept = [g for g in data.graphs if g.hlo is not None]
    if not kept:
        return Counter(), 0
    ran = {e.graph_hash for e in data.debug.executions() if e.step in steady and e.graph_hash}
    chosen = [g for g in kept if g.graph_hash is not None and g.graph_hash in ran]
    if not chosen:
        chosen = [max(kept, key=lambda g: g.hlo.op_count if g.hlo is not None else 0)]
    by_line: Counter[Location] = Counter()
    total = 0
    for graph in chosen:
        assert graph.hlo is not None
        for op in graph.hlo.instructions:
            if op.opcode in _NOT_OPS:
                continue
            total += 1
            if op.source_file and op.source_line is not None:
                by_line[Location(op.source_file, op.source_line)] += 1
    return by_line, total


def _in_use(data: AnalysisInput, location: Location | None) -> _InUse:
    """What the script already uses: from the run's execution causes and frames, its graphs'
    source files and torch.compile's records, then from the script's source where readable."""
    seen = _InUse()
    for event in data.debug.events:
        _note_event(seen, event.cause or "", [frame.file or "" for frame in event.frames])
    if seen.dynamo is None and data.dynamo:
        seen.dynamo = "torch.compile's records"
    if any(
        _SCAN_FILE in (op.source_file or "").replace("\\", "/")
        for graph in data.graphs
        if graph.hlo is not None
        for op in graph.hlo.instructions
    ):
        seen.scan = "graph ops traced in torch_xla's scan"
    files = {f for f in (data.script, location.file if location else None) if f}
    for file in sorted(files):
        text = data.sources.text(file)
        for name, words in _SOURCE_WORDS.items():
            if text is not None and getattr(seen, name) is None and any(w in text for w in words):
                setattr(seen, name, f"the script's source ({words[0].rstrip('(')})")
    return seen


def _note_event(seen: _InUse, cause: str, files: list[str]) -> None:
    """Note in ``seen`` what one execution's cause and frames show in use."""
    if seen.compile is None and _COMPILE_CAUSE in cause:
        seen.compile = "executions caused by torch_xla.compile"
    if seen.loader is None and (
        _LOADER_CAUSE in cause or any(f.endswith(LOADER_FILE) for f in files)
    ):
        seen.loader = "syncs made by the parallel loader"
    if seen.dynamo is None and any(DYNAMO_DIR in f.replace("\\", "/") for f in files):
        seen.dynamo = "executions made by the openxla dynamo backend"


def _suggestion(
    sources: SourceFiles, top: tuple[Location, int] | None, graph_ops: int, in_use: _InUse
) -> str:
    """The fix, from where the ops come from and what the script already uses."""
    text = TRACE_LESS
    if top is not None:
        location, ops = top
        code = source_line(sources, location.file, location.line)
        quoted = f" (`{code}`)" if code else ""
        text = (
            f"Line {location.line}{quoted} accounts for {ops} of the {graph_ops} HLO "
            f"instructions in the step's graph: the host traces and lowers its ops again every "
            f"step. " + text
        )
    if in_use.compile is not None:
        text += FIX_COMPILE_IN_USE
    if in_use.dynamo is None:
        text += FIX_DYNAMO
    if in_use.scan is None:
        text += FIX_PURE
    if in_use.loader is None:
        text += FIX_LOADER
    return text


def _work_location(sources: SourceFiles, lines: list[str]) -> Location | None:
    """The top sampled line that is not a step-ending call (where tracing work is written)."""
    located = [loc for loc in map(_location, lines) if loc is not None]
    for location in located:
        text = source_line(sources, location.file, location.line) or ""
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
