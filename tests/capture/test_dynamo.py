"""dynamo's records (``xlaprof.capture.dynamo``), in-process on the real torch: recompile
reasons and graph breaks, with their steps and the user's lines.

torch.compile runs with the "eager" backend here (no XLA device needed: the records are
dynamo's, whatever the backend); the corpus runs the openxla backend under `xlaprof run`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from xlaprof.analyzers import graph_break, recompilation  # noqa: E402
from xlaprof.capture.dynamo import DynamoRecorder  # noqa: E402
from xlaprof.model.input import AnalysisInput  # noqa: E402
from xlaprof.parse.dynamo_log import parse_dynamo_records  # noqa: E402
from xlaprof.parse.frames import is_library_file  # noqa: E402


def test_dynamo_reasons_and_graph_breaks_are_recorded(tmp_path: Path) -> None:
    # GIVEN a function compiled by dynamo that branches on a tensor value (a graph break),
    # WHEN it is fed 16, 12 and 9 rows with the recorder on
    step = {"n": 0}
    torch._dynamo.reset()  # (it also drops compile callbacks: reset before recording)
    recorder = DynamoRecorder(tmp_path, lambda: step["n"], is_library_file)
    assert recorder.start() is None

    def forward(x):
        y = x * 2
        if y.sum() > 0:
            y = y + 1
        return y

    compiled = torch.compile(forward, backend="eager", dynamic=False)
    try:
        for size in (16, 12, 9):
            compiled(torch.ones(size, 4))
            step["n"] += 1
    finally:
        recorder.stop()
        torch._dynamo.reset()
    # THEN dynamo's own guard failures and graph breaks are in dynamo.jsonl, with their steps
    # and the user's line calling the compiled function
    rows = [json.loads(line) for line in (tmp_path / "dynamo.jsonl").read_text().splitlines()]
    records = parse_dynamo_records(rows)
    recompiles = [r for r in records if r.kind == "recompile" and r.function == "forward"]
    assert [(r.mismatch.expected, r.mismatch.actual) for r in recompiles if r.mismatch] == [
        (16, 12),
        (12, 9),
    ]
    assert [r.step for r in recompiles] == [1, 2]
    breaks = [r for r in records if r.kind == "graph_break"]
    assert breaks and breaks[0].reason == "Data-dependent branching"
    assert breaks[0].code.endswith(f"{Path(__file__).name}:{_line_of('if y.sum() > 0:')}")
    assert any(r.kind == "compile" for r in records)
    assert (
        recompiles[0]
        .user_frames[0]
        .endswith(f"{Path(__file__).name}:{_line_of('compiled(torch.ones(size, 4))')}")
    )
    # and the analysis makes one finding per cause: the resumed function after the break
    # recompiles for the same changed input, and is not a second cause
    data = AnalysisInput(dynamo=records)
    (finding,) = recompilation.analyze(data)
    assert finding.evidence["sizes_seen"] == [16, 12, 9]
    assert len(graph_break.analyze(data)) == 1
    # and the artifacts are off again: nothing recorded, nothing printed, after stop
    from torch._logging._internal import log_state

    assert not log_state.is_artifact_enabled("recompiles")


def _line_of(needle: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(
        n for n, text in enumerate(lines, start=1) if needle in text and "_line_of" not in text
    )
