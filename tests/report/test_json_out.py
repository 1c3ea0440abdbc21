"""The JSON document (``xlaprof.report.json_out``): what ``--json`` writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from builders import pod_logdir
from helpers import sample_capture
from hypothesis import given, settings
from hypothesis import strategies as st

from xlaprof.inputs.traces import load_trace
from xlaprof.model.document_id import SCHEMA, SELF_CHECK_ENV
from xlaprof.model.result import AnalysisResult
from xlaprof.report.json_out import dumps


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


# JSON values as the document holds them: strict (no NaN), string keys, nested both ways.
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=40,
)


@settings(max_examples=300)
@given(st.dictionaries(st.text(max_size=8), _VALUES, max_size=6))
def test_the_written_text_reads_back_as_the_document_the_standard_encoder_writes(
    document: dict[str, Any],
) -> None:
    # GIVEN any strict JSON document
    # WHEN it is written
    text = dumps(document)
    # THEN it parses to what the standard library's indented text parses to, and to itself
    assert json.loads(text) == json.loads(json.dumps(document, indent=2)) == document


def test_a_tables_rows_go_one_to_a_line_and_nested_objects_open() -> None:
    # GIVEN a document with a table of flat rows and a finding with nested evidence
    rows = [{"step": n, "wall_s": n / 10, "host": "h"} for n in range(3)]
    document = {"rows": rows, "findings": [{"evidence": {"steps": [1, 2]}, "kind": "k"}]}
    # WHEN it is written
    lines = dumps(document).splitlines()
    # THEN each row is one line of its own, and the finding is opened key by key
    for row in rows:
        assert f"    {json.dumps(row)}," in lines or f"    {json.dumps(row)}" in lines
    assert '      "evidence": {' in lines
    assert '        "steps": [1, 2]' in lines
    # AND a value the strict document may not hold is refused, as the standard encoder does
    with pytest.raises(ValueError):
        dumps({"rows": [{"x": float("nan")}]})


def test_a_users_json_run_skips_the_schemas_models_and_the_suites_run_checks_with_them(
    tmp_path: Path,
) -> None:
    # GIVEN a real capture, analyzed with --json in fresh processes, the self-check's variable
    # unset (a user's run) and set (the suite's)
    capture = sample_capture("healthy_loop")
    probe = (
        "import sys\n"
        "from xlaprof.cli import main\n"
        f"sys.argv = ['xlaprof', 'analyze', {str(capture)!r}, '--json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write('pydantic imported: %s' % ('pydantic' in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != SELF_CHECK_ENV}
    runs = {
        checked: subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            env={**env, **({SELF_CHECK_ENV: "1"} if checked else {})},
            timeout=300,
        )
        for checked in (False, True)
    }
    # THEN both write the same document, and only the checked run imported the models
    assert json.loads(runs[False].stdout) == json.loads(runs[True].stdout)
    assert runs[False].stderr.endswith("pydantic imported: False"), runs[False].stderr[-500:]
    assert runs[True].stderr.endswith("pydantic imported: True"), runs[True].stderr[-500:]


def test_the_self_check_raises_on_a_document_its_schema_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from xlaprof.report import json_out

    # GIVEN a document whose finding has a severity the schema does not know
    result = AnalysisResult(parts=[])
    bad = {"schema": SCHEMA, "findings": [{"kind": "x", "severity": "dire", "title": "t"}]}
    monkeypatch.setattr(json_out, "results_document", lambda parts, totals: bad)
    # WHEN it is made without the check and with it
    # THEN only the check refuses it, as xlaprof's own bug
    assert json_out.analysis_json(result)["findings"] == bad["findings"]
    with pytest.raises(RuntimeError, match="its own schema refuses"):
        json_out.analysis_json(result, self_check=True)
