"""Memory pressure: activations (intermediate tensors) dominate a graph's memory.

Reads the post-compilation memory analysis of each compiled graph (PT_XLA_DEBUG: graph input,
output, aliased input and intermediate sizes) and, where a run recorded it, the device's memory
use (``run.json`` ``device_memory``: bytes used and limit, from ``xm.get_memory_info``; TPU HBM).
Activations can be traded for compute (rematerialization) or moved to host memory (offload).
"""

from __future__ import annotations

from xlaprof.analyzers.shared.sourcecode import bench_factory
from xlaprof.findings import Finding, Kind, Severity, bench_command
from xlaprof.model.input import AnalysisInput
from xlaprof.parse.debug_log import DebugEvent, MemoryAnalysis
from xlaprof.parse.units import format_bytes

# Intermediate tensors at least this share of a graph's memory (inputs + outputs + temps) ...
ACTIVATION_SHARE = 0.5
# ... and at least this many bytes (smaller graphs are not under pressure).
MIN_INTERMEDIATE_BYTES = 1024**3
# Device memory in use at this share of the limit makes it an error.
DEVICE_FULL_SHARE = 0.9


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not have looked at ``data`` (no memory figures), or None."""
    if data.device_memory is not None or any(
        e.memory is not None for e in data.debug.compilations()
    ):
        return None
    return "no post-compilation memory analysis or device memory figures"


def analyze(data: AnalysisInput) -> list[Finding]:
    # The graph with the most intermediate bytes: its event, memory, total and those bytes.
    worst: tuple[DebugEvent, MemoryAnalysis, float, float] | None = None
    for event in data.debug.compilations():
        memory = event.memory
        if memory is None or memory.intermediate_bytes is None:
            continue
        intermediate = memory.intermediate_bytes
        live = (memory.input_bytes or 0) + (memory.output_bytes or 0)
        live -= memory.aliased_input_bytes or 0
        total = max(live, 0) + intermediate
        if total and (worst is None or intermediate > worst[3]):
            worst = (event, memory, total, intermediate)
    device = data.device_memory or {}
    used, limit = device.get("bytes_used"), device.get("bytes_limit")
    device_share = used / limit if used and limit else None
    if worst is None and device_share is None:
        return []
    evidence: dict[str, object] = {}
    severity = Severity.WARNING
    fires = False
    if worst is not None:
        event, memory, total, intermediate = worst
        share = intermediate / total
        evidence.update(
            {
                "graph_hash": event.graph_hash,
                "intermediate_bytes": memory.intermediate_bytes,
                "input_bytes": memory.input_bytes,
                "output_bytes": memory.output_bytes,
                "aliased_input_bytes": memory.aliased_input_bytes,
                "intermediate_share": round(share, 3),
            }
        )
        fires = share >= ACTIVATION_SHARE and intermediate >= MIN_INTERMEDIATE_BYTES
    if device_share is not None:
        evidence["device_memory_share"] = round(device_share, 3)
        evidence["device_bytes_used"] = used
        evidence["device_bytes_limit"] = limit
        if device_share >= DEVICE_FULL_SHARE:
            severity, fires = Severity.ERROR, True
    if not fires:
        return []
    title = (
        f"Activations dominate memory: {format_bytes(worst[3])} of "
        f"intermediate tensors ({evidence['intermediate_share']:.0%} of the graph's memory)"
        if worst is not None
        else f"Device memory {device_share:.0%} full"
    )
    script, factory = data.script, bench_factory(data.sources, data.script)
    return [
        Finding(
            kind=Kind.MEMORY_PRESSURE,
            severity=severity,
            title=title,
            evidence={
                **evidence,
                "bench_commands": [
                    bench_command("remat", script, factory=factory),
                    bench_command("offload", script, factory=factory),
                ],
            },
            suggestion=(
                "Rematerialize activations (torch_xla.utils.checkpoint.checkpoint around each "
                "layer) to trade compute for memory, or offload them to host memory inside a "
                "scan (a partition_fn using place_to_host/place_to_device, where the backend "
                "has host memory). Measure both on your model: `xlaprof bench remat` and "
                "`xlaprof bench offload` with a factory returning (model, batch) (the commands "
                "are in the evidence)."
            ),
        )
    ]
