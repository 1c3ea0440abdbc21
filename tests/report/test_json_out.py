"""The JSON document (``xlaprof.report.json_out``): what ``--json`` writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import pod_logdir

from xlaprof.inputs.traces import load_trace


def test_the_json_document_keeps_the_first_step_rows_and_counts_them_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xlaprof.tables import document as writer  # the pipeline writes the trace object

    # GIVEN four hosts of six steps, and a document cap below their rows
    pod_logdir(tmp_path, 4)
    trace = load_trace(tmp_path, lazy=True, workers=2)
    every_step = trace.device_steps()
    every_tracing = trace.tracing_vs_device()
    assert len(every_step) > 10 and len(every_tracing) > 10
    monkeypatch.setattr(writer, "MAX_STEP_ROWS", 10)
    # WHEN the trace object is written
    document = writer.trace_json(trace)
    # THEN the totals are every row, and the rows kept are the first ones, hosts in order
    assert document["device_steps_total"] == len(every_step)
    assert document["tracing_total"] == len(every_tracing)
    kept = [(r["host"], r["device"], r["step"]) for r in document["device_steps"]]
    first = every_step.head(10)
    assert kept == list(zip(first["host"], first["device"], first["step"], strict=True))
    assert len(document["tracing"]) == 10
