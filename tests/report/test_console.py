"""The terminal report (``xlaprof.report.console``): at any width, no number or key is cut."""

from __future__ import annotations

import re

import pytest
from helpers import SAMPLES, cli, jax_cpu_sample


# -- output at any width ---------------------------------------------------------------------------
@pytest.mark.parametrize("width", [50, 80, 200])
def test_console_output_cuts_no_number_or_key(width: int) -> None:
    from xlaprof.inputs.paths import load_parts
    from xlaprof.model.result import AnalysisResult
    from xlaprof.pipeline import analyze_parts
    from xlaprof.report import RenderOptions, render

    results = analyze_parts(load_parts([SAMPLES / "runs" / "tracing_bound_tiny_ops"], 1 << 30))
    text = render(AnalysisResult(results), "console", options=RenderOptions(width=width))
    timeline = results[0].timeline
    median = timeline[timeline["step"] >= 2]["wall_s"].median()
    assert f"{median * 1e3:.2f}" in text  # the median row's number, whole
    evidence = re.search(r"evidence: (.*?)\n   fix:", text, re.S).group(1).replace("\n", "")
    for item in evidence.split("; "):
        assert item.startswith("…") or "=" in item, item  # whole key=value items only
    assert "…" not in text.split("evidence:")[0].replace("[", "")  # no cut header or cell


def test_console_shows_bottlenecks_and_no_longer_says_captures_feed_no_analyzer() -> None:
    done = cli("analyze", str(jax_cpu_sample()), env={"COLUMNS": "160"})
    assert done.returncode == 0
    assert "Bottleneck per step" in done.stdout and "Device time by source line" in done.stdout
    assert "not the analyzers" not in done.stdout
    assert "1 device(s)" in done.stdout.replace("\n", " ")


def test_output_to_a_file_or_pipe_is_not_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    from xlaprof.inputs.paths import load_parts
    from xlaprof.model.result import AnalysisResult
    from xlaprof.pipeline import analyze_parts
    from xlaprof.report import render

    # GIVEN a run whose finding has a long title and a long fix, and no COLUMNS set
    monkeypatch.delenv("COLUMNS", raising=False)
    results = analyze_parts(load_parts([SAMPLES / "runs" / "recompile_varying_batch"], 1 << 30))
    (finding,) = results[0].findings
    # WHEN the console report is written somewhere that is not a terminal (a StringIO here)
    text = render(AnalysisResult(results), "console")
    lines = text.splitlines()
    # THEN each of its lines is whole, however long: the title, the fix, the worth-most line
    assert any(line.endswith(finding.title) for line in lines)
    assert f"   fix: {finding.suggestion}" in lines
    assert any(line.startswith("Worth most:") and str(finding.location) in line for line in lines)
    assert max(map(len, lines)) > 80
