"""The terminal report (``xlaprof.report.console``): at any width, no number or key is cut."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from decode import decode_kineto
from helpers import HTA, MI210, SAMPLES, cli, jax_cpu_sample, shared_trace


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


# The Kineto categories of device work: a capture with none has no device tables.
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


@pytest.mark.parametrize("name", [HTA, MI210])
def test_no_findings_points_to_bottleneck_tables_only_where_shown(
    name: str, tmp_path: Path
) -> None:
    has_device = any(e.get("cat") in DEVICE_CATS for e in decode_kineto(shared_trace(name)))
    assert has_device == (name == MI210)  # HTA's capture holds no device events
    done = cli("analyze", str(shared_trace(name)), env={"COLUMNS": "300"})
    assert done.returncode == 0, done.stderr
    shown = "Bottleneck by device" in done.stdout
    assert shown == has_device
    assert ("bottleneck tables above" in done.stdout) == shown
    assert "No findings" in done.stdout
    page = tmp_path / "report.html"
    assert cli("report", str(shared_trace(name)), "-o", str(page)).returncode == 0
    assert ("bottleneck tables below" in page.read_text()) == shown
