"""One request, one result: every command reads the same numbers off the same real run.

A bundled example is recorded twice into one ``--out`` with ``xlaprof run`` (once per module):
the second recording is a new run, which every command reads unless ``--process`` names the
first. On that run ``analyze``, ``report``, ``diff``, ``check``, the MCP tools and the notebook
facade must give the step count, median steady step, compile count and top finding that the
run's own per-step rows say (the rows torch_xla's counters were read into as it ran).
"""

from __future__ import annotations

import json
import re
import sys
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from decode import run_steps
from helpers import EXAMPLES, cli, html_without_saved_rows, without_read_from, without_saved_line

from xlaprof.cli import main
from xlaprof.rundir.reader import find_runs, load_run

WARMUP = 2


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The folder holding two runs of host_sync_item, the earlier run's and the later's."""
    out = tmp_path_factory.mktemp("twice") / "runs"
    script = str(EXAMPLES / "host_sync_item.py")
    for steps in ("8", "10"):
        done = cli("run", "--out", str(out), "--", sys.executable, script, "--steps", steps)
        assert done.returncode == 0, done.stderr[-3000:]
    # the second recording says it is a new run beside an earlier one
    assert "also holds 1 process folder(s) of earlier runs" in done.stderr
    runs = sorted(find_runs(out), key=lambda p: load_run(p).info.started or 0)
    assert len(runs) == 2
    return out, runs[0], runs[1]


def invoke(*args: str) -> Any:
    # a terminal wide enough for a header naming a worker's deep temporary folder unwrapped
    result = CliRunner(env={"COLUMNS": "300"}).invoke(main, list(args), catch_exceptions=False)
    return result


def truth(run: Path) -> dict[str, Any]:
    """What the run's own files say: steps, compilations, the median steady step's time in the
    run (after warm-up, compiling nothing: the lower middle one; each step's time from its
    rows and executions as ``decode.run_steps`` reads the JSON), in seconds."""
    steps = load_run(run).steps()
    times = run_steps(run)
    steady = sorted(
        times[int(step)]["time_s"]
        for step, compiles in zip(steps["step"], steps["compiles"], strict=True)
        if step >= WARMUP and compiles == 0
    )
    median = float(steady[(len(steady) - 1) // 2])
    return {"steps": len(steps), "compiles": int(steps["compiles"].sum()), "median": median}


def test_a_rerun_is_a_new_run_and_commands_read_the_latest(
    recorded: tuple[Path, Path, Path],
) -> None:
    # GIVEN a folder written twice by `xlaprof run --out`
    out, first, latest = recorded
    # WHEN it is analyzed without --process
    done = invoke("analyze", "--json", str(out))
    document = json.loads(done.stdout)
    # THEN the latest run is read (by its recorded start), and the note says others exist
    assert document["run"]["path"] == str(latest)
    assert document["summary"]["steps"] == truth(latest)["steps"] == 10
    assert "holds 2 runs: reading the latest" in done.stderr
    assert first.name in done.stderr
    # AND --process names the earlier one, everywhere a run directory is read
    earlier = json.loads(invoke("analyze", "--json", "--process", first.name, str(out)).stdout)
    assert earlier["summary"]["steps"] == truth(first)["steps"] == 8
    diffed = json.loads(
        invoke("diff", "--json", "--process", first.name, str(out), str(out)).stdout
    )
    assert diffed["before"] == diffed["after"] == str(out)
    checked = json.loads(
        invoke("check", "--json", "--max-graphs", "99", "--process", first.name, str(out)).stdout
    )
    assert checked["runs"][0]["steps"] == 8


def test_every_command_gives_the_same_numbers(
    recorded: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    from xlaprof.api import Analysis
    from xlaprof.mcp.roots import Roots
    from xlaprof.mcp.tools import Tools

    out, _, latest = recorded
    expected = truth(latest)

    # analyze
    document = json.loads(invoke("analyze", "--json", str(out)).stdout)
    top = document["findings"][0]
    assert top["kind"] == "host_sync"  # the example's own diagnosis
    assert document["summary"]["steps"] == expected["steps"]
    assert document["summary"]["compiles"] == expected["compiles"]
    assert document["story"]["median_wall_s"] == pytest.approx(expected["median"])

    # report: the page's counts, its story's median step and its first finding
    page = tmp_path / "r.html"
    assert invoke("report", str(out), "-o", str(page)).exit_code == 0
    html = page.read_text()
    assert f"<td>steps</td><td>{expected['steps']}</td>" in html
    assert f"<td>compilations</td><td>{expected['compiles']}</td>" in html
    median_step = document["story"]["median_step"]
    assert re.search(rf"median steady step \(step {median_step}\)", html)
    first_finding = re.search(r'<span class="kind">([a-z_]+)</span> ([^<]*)<', html)
    assert first_finding is not None
    assert (first_finding[1], unescape(first_finding[2])) == (top["kind"], top["title"])

    # diff: the run against itself
    diffed = json.loads(invoke("diff", "--json", str(out), str(out)).stdout)
    rows = {row["metric"]: row for row in diffed["comparison"]}
    assert rows["compilations"]["before"] == expected["compiles"]
    assert rows["steady step time (median)"]["before"] == pytest.approx(expected["median"])

    # check: the step count, and the median step the step-time budget judges
    done = invoke(
        "check", "--json", "--baseline", str(out), "--max-step-time-ratio", "1.5", str(out)
    )
    checked = json.loads(done.stdout)
    (run,) = checked["runs"]
    assert run["steps"] == expected["steps"]
    (budget,) = run["budgets"]
    assert budget["evidence"]["median_s"] == pytest.approx(expected["median"])

    # MCP, driven in-process
    tools = Tools(Roots([out]))
    answer = tools.analyze(str(out))
    assert answer.summary.steps == expected["steps"]
    assert answer.summary.compiles == expected["compiles"]
    assert (answer.findings[0].kind, answer.findings[0].title) == (top["kind"], top["title"])
    steady = tools.steps(str(out)).steady
    assert steady is not None and steady.median_step == median_step
    assert steady.median_s["wall_s"] == pytest.approx(expected["median"])

    # the notebook facade
    analysis = Analysis(out, warn=False)
    assert len(analysis.steps()) == expected["steps"]
    assert analysis.summary()["compiles"] == expected["compiles"]
    assert analysis.summary()["step_median_s"] == pytest.approx(expected["median"])
    first = analysis.findings().iloc[0]
    assert (first["kind"], first["title"]) == (top["kind"], top["title"])


def test_a_saved_result_renders_as_the_run_did(
    recorded: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    # GIVEN a run's --json saved to a file
    out, _, _ = recorded
    saved = tmp_path / "saved.json"
    assert invoke("analyze", str(out), "-o", str(saved)).exit_code == 0
    # WHEN the saved document is shown again, on the console and as a report
    direct = invoke("analyze", str(out)).stdout
    again = invoke("analyze", str(saved)).stdout
    invoke("report", str(out), "-o", str(tmp_path / "direct.html"))
    invoke("report", str(saved), "-o", str(tmp_path / "again.html"))
    # THEN both are byte for byte what the run gave, and so is the JSON written again, but
    # for the line saying which saved file was read
    assert again.startswith(f"xlaprof analyze {saved}  (a saved result")
    assert without_saved_line(again) == direct
    page = (tmp_path / "again.html").read_bytes()
    assert html_without_saved_rows(page) == (tmp_path / "direct.html").read_bytes()
    rewritten = without_read_from(invoke("analyze", "--json", str(saved)).stdout)
    assert rewritten == json.loads(saved.read_text())
