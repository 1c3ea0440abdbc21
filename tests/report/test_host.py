"""The host-side sections (``xlaprof.report.host``) in the terminal, ``--json`` and HTML forms
of one analysis: the same rows in each (one run tells one story), and the same again from a
saved ``--json`` (the pipeline computed them; the renderers only format)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import SAMPLES, cli, html_without_saved_rows, without_saved_line

CAPTURE = SAMPLES / "host_capture"


def test_the_forms_show_the_same_host_rows_and_compiles(tmp_path: Path) -> None:
    # GIVEN a CPU-only capture with its run's TORCH_TRACE log, analyzed three ways
    saved = tmp_path / "saved.json"
    assert cli("analyze", str(CAPTURE), "-o", str(saved)).returncode == 0
    document = json.loads(saved.read_text())
    text = cli("analyze", str(CAPTURE), env={"COLUMNS": "200"}).stdout
    page = tmp_path / "r.html"
    assert cli("report", str(CAPTURE), "-o", str(page)).returncode == 0
    html = page.read_text()
    (part,) = document.get("parts", [document])
    activity = part["host_activity"]
    compiles = part["torch_compiles"]
    # THEN the JSON holds every step and compile, and the other forms the same values
    assert activity["steps_total"] == len(activity["steps"]) == 12
    assert activity["device_planes"] is False
    step8 = next(r for r in activity["steps"] if r["step"] == 8)
    assert step8["python_ms"] is None  # no Python-tracer event: not measured, not 0
    assert f"{step8['compile_ms']:.2f}" in text
    assert [c["compile_id"] for c in compiles] == ["0/0", "0/1"] and compiles[1]["step"] == 8
    assert "Host time per step" in text and "torch.compile (TORCH_TRACE)" in text
    assert "Host time per step" in html and f"{compiles[1]['seconds']:.3f}" in html
    # the host table's median row is the story's median steady step
    median = part["story"]["median_step"]
    assert f"{median} (median of {part['story']['steady_steps']} steady)" in text
    # and where the step model measured no part, the story says why and points at the host
    # table, in the console and the page alike (never naming the unattributed rest a cause)
    if not any(v for k, v in part["story"]["parts"].items() if k != "unattributed"):
        pointer = "the host table below splits each step by what the host did"
        assert pointer in text and pointer in html
        assert "Largest measured part" not in text
    # AND the saved document renders the same text and page again
    # (but for the line and row naming the saved file read)
    again = cli("analyze", str(saved), env={"COLUMNS": "200"}).stdout
    assert without_saved_line(again) == text
    page_again = tmp_path / "again.html"
    assert cli("report", str(saved), "-o", str(page_again)).returncode == 0
    assert html_without_saved_rows(page_again.read_bytes()) == page.read_bytes()
