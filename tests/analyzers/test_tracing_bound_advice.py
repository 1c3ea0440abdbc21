"""tracing_bound's place and fix, built from what the run saw, on fixed inputs.

The shape is examples/realcode/tracing_bound_compiled.py's run: a per-element loss loop inside
a step wrapped in ``torch_xla.compile``, fed by ``MpDeviceLoader``; the sampler's top line was
``loss.backward()``, while the graph's ops come from the loss line (backward ops carry torch's
decomposition lines). The set-up itself is judged in tests/corpus/test_realcode.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import paced_steps

from xlaprof.analyzers import tracing_bound
from xlaprof.model.input import AnalysisInput
from xlaprof.model.sources import SourceFiles
from xlaprof.parse.debug_log import DebugEvent, DebugLog
from xlaprof.parse.frames import Frame
from xlaprof.parse.hlo import HloModule, Instruction
from xlaprof.rundir.schema import GraphInfo

DECOMP = "/venv/lib/python3.11/site-packages/torch/_decomp/decompositions.py"
SOURCE = """def main():
    for x, y in pl.MpDeviceLoader(loader, device):
        out = model(x)
        loss = (out[0, 0] - y[0, 0]).abs()
        loss.backward()
"""


@pytest.fixture
def script(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    return str(path)


def _graph(script: str) -> HloModule:
    ops = [Instruction(0, "p0", "parameter", "f32[16,16]", parameter=0)]
    ops += [
        Instruction(i, f"a{i}", "add", "f32[]", source_file=script, source_line=4)
        for i in range(1, 101)
    ]
    ops += [
        Instruction(i, f"b{i}", "multiply", "f32[]", source_file=DECOMP, source_line=840)
        for i in range(101, 251)
    ]
    ops += [Instruction(251, "m", "dot", "f32[16,16]", source_file=script, source_line=3)]
    return HloModule("train_step", ops)


def _data(script: str, cause: str) -> AnalysisInput:
    steps, runs = paced_steps(20e-3, 0.3e-3, 20e-3)
    frames = [Frame("main", script, 2)]
    events = [DebugEvent("execution", cause, "g1", frames=frames, step=i) for i in range(8)]
    sampled = {f"{script}:5": 0.6, f"{script}:4": 0.3}
    return AnalysisInput(
        steps=steps,
        execution_rows=runs,
        debug=DebugLog(events=events),
        graphs=[GraphInfo(0, 0, "train_step", _graph(script), graph_hash="g1")],
        host_samples={i: sampled for i in range(8)},
        script=script,
        sources=SourceFiles([Path(script).parent]),  # read only under a source root (issue 16)
    )


def test_placed_at_the_line_making_the_graphs_ops_not_at_backward(script: str) -> None:
    # GIVEN a tracing-bound run whose sampler's top line is loss.backward() (line 5) and whose
    # graph has 100 ops from the loss line (4), 150 backward ops in torch's decompositions and
    # one from the model call (3)
    data = _data(script, "torch_xla.compile")
    # WHEN tracing_bound judges it
    (finding,) = tracing_bound.analyze(data)
    # THEN the finding sits at the loss line, with the graph's count as evidence
    assert finding.location is not None and finding.location.line == 4
    assert finding.evidence["graph_ops_by_user_line"] == {f"{script}:4": 100, f"{script}:3": 1}
    assert "Line 4 (`loss = (out[0, 0] - y[0, 0]).abs()`) accounts for 100 of the 251" in (
        finding.suggestion or ""
    )


def test_the_fix_does_not_advise_what_the_script_already_uses(script: str) -> None:
    # GIVEN the step's executions caused by torch_xla.compile and a script feeding MpDeviceLoader
    data = _data(script, "torch_xla.compile")
    # WHEN tracing_bound judges it
    (finding,) = tracing_bound.analyze(data)
    fix = finding.suggestion or ""
    # THEN it says torch_xla.compile does not remove tracing, never that it replays without it,
    # and does not advise MpDeviceLoader again
    assert finding.evidence["already_in_use"].keys() == {"torch_xla.compile", "MpDeviceLoader"}
    assert "already wrapped in torch_xla.compile" in fix and "traces every call" in fix
    assert "replay without tracing" not in fix and "MpDeviceLoader" not in fix


def test_a_plain_sync_loop_gets_the_loader_advice(script: str, tmp_path: Path) -> None:
    # GIVEN the same run synced by the script's own torch_xla.sync(), from a script without a
    # loader
    Path(script).write_text(SOURCE.replace("pl.MpDeviceLoader(loader, device)", "batches"))
    data = _data(script, "user torch_xla.sync")
    # WHEN tracing_bound judges it THEN the loader is advised and torch_xla.compile is not said
    # to be in use
    (finding,) = tracing_bound.analyze(data)
    fix = finding.suggestion or ""
    assert "MpDeviceLoader" in fix and "already wrapped" not in fix
    assert "already_in_use" not in finding.evidence
