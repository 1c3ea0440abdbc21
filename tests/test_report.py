"""The notebook facade, the figures, and the HTML report in a real headless browser."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import SAMPLES, cli

import xlaprof
from xlaprof.report import figures

CHROMIUM = shutil.which("chromium")
HOSTILE = [
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">",
    "</script><script>document.body.setAttribute('data-pwned','script')</script>",
]


def test_facade_tables_and_figures() -> None:
    analysis = xlaprof.Analysis(SAMPLES / "runs" / "recompile_varying_batch")
    assert list(analysis.findings()["kind"]) == ["recompilation"]
    assert len(analysis.steps()) == 12 and len(analysis.timeline()) == 12
    assert list(analysis.compiles()["step"])[:2] == [0, 1]
    timeline = analysis.plot_timeline()
    names = [trace.name for trace in timeline.data]
    assert {"compile", "Python + tracing", "device busy", "step wall time"} <= set(names)
    compile_bar = next(t for t in timeline.data if t.name == "compile")
    assert list(compile_bar.x) == list(range(12)) and max(compile_bar.y) > 100  # ms
    # a CPU capture has no device planes: its device is the CPU executor's XLA ops
    device = analysis.plot_device_ops()
    shown = {name for bar in device.data for name in bar.y}
    ops = analysis.device_ops()
    assert set(ops["device"]) == {"CPU"} and shown <= set(ops["name"]) and shown


def test_compare_says_plainly_what_got_worse() -> None:
    before = xlaprof.Analysis(SAMPLES / "runs" / "unrolled_layers")
    after = xlaprof.Analysis(SAMPLES / "runs" / "scanned_layers")
    table = before.compare(after).set_index("metric")
    ops = table.loc["largest graph (ops)"]
    assert ops["after"] < ops["before"] and "better" in ops["change"]
    for _, row in table.dropna(subset=["ratio"]).iterrows():
        assert ("worse" in row["change"]) == (row["ratio"] > 1.02)
    figure = before.plot_compare(after)
    assert list(figure.data[0].y) == list(table.dropna(subset=["ratio"]).index)


def test_figures_take_frames_and_handle_empty_ones() -> None:
    import pandas as pd

    for make in (figures.step_timeline, figures.top_regions, figures.metric_deltas):
        figure = make(pd.DataFrame())
        assert figure.layout.annotations and not figure.data


def _hostile_run(tmp_path: Path) -> Path:
    source = next((SAMPLES / "runs" / "healthy_loop").iterdir())
    run = tmp_path / "run" / source.name
    shutil.copytree(source, run)
    with (run / "regions.jsonl").open("a") as handle:
        for name in HOSTILE:
            handle.write(json.dumps({"step": 3, "name": name, "calls": 1, "seconds": 0.01}) + "\n")
    return run.parent


def _chromium(*args: str, page: Path, profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=10000",
            *args,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium: `make test` installs it")
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    # GIVEN a real run with region names that try to inject HTML and script
    out = tmp_path / "report.html"
    result = cli("report", str(_hostile_run(tmp_path)), "-o", str(out))
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    # self-contained: plotly is inlined and no tag loads anything from elsewhere
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=[\"']?https?:", page)
    assert "Plotly" in page
    # WHEN chromium loads it (offline: a file URL, network features off)
    dom = _chromium("--dump-dom", page=out, profile=tmp_path / "profile")
    # THEN every figure is drawn, nothing was injected, and the page logged nothing
    assert dom.returncode == 0, dom.stderr[-2000:]
    for name in ("timeline", "compilations", "regions", "device-ops", "metric-deltas"):
        match = re.search(rf'<div[^>]*id="fig-{name}"[^>]*class="([^"]*)"', dom.stdout)
        assert match and "js-plotly-plot" in match.group(1), name
    assert dom.stdout.count('class="main-svg"') >= 10
    body = re.search(r"<body[^>]*>", dom.stdout).group(0)
    assert "data-pwned" not in body
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    # and a screenshot can be taken of the first screen
    shot = _chromium(
        "--window-size=1280,1600",
        f"--screenshot={tmp_path / 'shot.png'}",
        page=out,
        profile=tmp_path / "profile2",
    )
    assert (tmp_path / "shot.png").stat().st_size > 10_000, shot.stderr[-1000:]


def test_report_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    out.write_text("mine")
    result = cli("report", str(SAMPLES / "runs" / "healthy_loop"), "-o", str(out))
    assert result.returncode == 11 and out.read_text() == "mine"


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
