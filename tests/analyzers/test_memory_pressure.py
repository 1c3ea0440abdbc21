"""Memory pressure (``xlaprof.analyzers.memory_pressure``): intermediate tensors against the
graph's inputs, and device memory near its limit."""

from __future__ import annotations

from xlaprof.analyzers import memory_pressure
from xlaprof.findings import Kind, Severity
from xlaprof.model.input import AnalysisInput
from xlaprof.parse.debug_log import DebugEvent, DebugLog, MemoryAnalysis

GiB = 1024**3


def _compile(intermediate: float) -> DebugEvent:
    memory = MemoryAnalysis(
        input_bytes=GiB, output_bytes=GiB, aliased_input_bytes=GiB, intermediate_bytes=intermediate
    )
    return DebugEvent(kind="compilation", graph_hash="g", memory=memory)


def test_memory_pressure_thresholds() -> None:
    heavy = AnalysisInput(debug=DebugLog(events=[_compile(12 * GiB)]), script="train.py")
    (finding,) = memory_pressure.analyze(heavy)
    assert finding.kind == Kind.MEMORY_PRESSURE and finding.evidence["intermediate_share"] > 0.9
    # train.py is not here to read: no factory is known, so the text says how to write one
    (remat, _offload) = finding.evidence["bench_commands"]
    assert "returns (model, example_batch)" in remat and "xlaprof bench remat train.py:" in remat
    light = AnalysisInput(debug=DebugLog(events=[_compile(0.1 * GiB)]))
    assert memory_pressure.analyze(light) == []
    full = AnalysisInput(device_memory={"bytes_used": 95, "bytes_limit": 100})
    (finding,) = memory_pressure.analyze(full)
    assert finding.severity == Severity.ERROR
