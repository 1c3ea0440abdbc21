"""The renderer contract (``xlaprof.report``): every result has its forms, picked by name or by
the extension of the file written; a form a result has not is one clear error."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from helpers import SAMPLES

import xlaprof


def test_one_renderer_contract_picks_by_name_or_extension(tmp_path: Path) -> None:
    # GIVEN one analysis, one check and one comparison of the sample runs
    from xlaprof.errors import OutputError
    from xlaprof.model.result import AnalysisResult, RunComparison
    from xlaprof.pipeline import analyze_one
    from xlaprof.report import render, renderer_for

    result, _, _ = analyze_one(SAMPLES / "runs" / "host_sync_item")
    analysis = AnalysisResult([result])
    check = xlaprof.check(SAMPLES / "runs" / "host_sync_item", max_host_syncs_per_step=0)
    comparison = RunComparison("a", "b", xlaprof.Analysis(SAMPLES / "runs" / "host_sync_item")
                               .compare(xlaprof.Analysis(SAMPLES / "runs" / "healthy_loop")),
                               ["gone"], [])  # fmt: skip
    # WHEN renderers are picked by name, by an output file's extension, and by default
    # THEN each kind of result gets its own form, and a form it has not is one clear error
    assert renderer_for(analysis, path=Path("out.html")).name == "html"
    assert renderer_for(analysis, path=Path("out.json")).name == "json"
    assert renderer_for(check, path=Path("out.xml")).name == "junit"
    assert renderer_for(comparison).name == "console"
    assert json.loads(render(analysis, "json"))["findings"][0]["kind"] == "host_sync"
    assert json.loads(render(check, "json"))["ok"] is False
    assert json.loads(render(comparison, "json"))["findings_disappeared"] == ["gone"]
    assert render(check, "text") == str(check) + "\n"
    assert render(analysis, path=Path("r.html")).startswith("<!DOCTYPE html>")
    with pytest.raises(OutputError, match=r"extension '\.xml'"):
        renderer_for(analysis, path=Path("out.xml"))
    with pytest.raises(OutputError, match="format 'junit'"):
        renderer_for(comparison, "junit")


def test_the_json_form_does_not_import_the_text_renderers() -> None:
    """``--json`` starts without rich (the console and HTML renderers load when first used:
    start-up is part of every answer's time), and the console form still renders."""
    import subprocess
    import sys

    code = (
        "import sys; import xlaprof.report as r; "
        "assert 'rich' not in sys.modules and 'xlaprof.report.console' not in sys.modules; "
        "print(r.renderer_for.__module__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    from xlaprof.model.result import AnalysisResult
    from xlaprof.pipeline import analyze_one
    from xlaprof.report import render

    result, _, _ = analyze_one(SAMPLES / "runs" / "host_sync_item")
    assert "host" in render(AnalysisResult([result]), "console").lower()


def test_the_html_page_says_what_was_not_measured_as_the_console_does() -> None:
    # GIVEN a run too short for the tracing-bound check: fewer than 3 steady steps (after the
    # 2 warm-up steps, without compiling), counted from its step records
    import re

    from xlaprof.model.result import AnalysisResult
    from xlaprof.pipeline import analyze_one
    from xlaprof.report import render

    records = next((SAMPLES / "runs" / "scanned_layers").glob("*/steps.jsonl"))
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    steady = sum(1 for row in rows if row["step"] >= 2 and row["compiles"] == 0)
    assert steady < 3
    result, _, _ = analyze_one(SAMPLES / "runs" / "scanned_layers")
    analysis = AnalysisResult([result])
    # WHEN it is rendered for the console and as the HTML page
    console = render(analysis, "console")
    page = render(analysis, "html")
    # THEN the page, which says "No findings", also says which kinds were not looked for and
    # why, in the console's words
    said = re.search(r"Not measured: .*", console)
    assert said is not None and f"the run has {steady})" in said.group(0)
    assert "No findings" in page
    assert html.escape(said.group(0).strip()) in page
