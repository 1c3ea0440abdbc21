"""The HTML report (``xlaprof.report.html``) in a real headless browser: self-contained, every
figure drawn, nothing injected."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import SAMPLES, cli

CHROMIUM = shutil.which("chromium")


HOSTILE = [
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">",
    "</script><script>document.body.setAttribute('data-pwned','script')</script>",
]


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
        timeout=300,  # bounds a hang only: a loaded machine takes longer
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
