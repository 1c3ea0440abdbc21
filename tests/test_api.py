"""The Python facade (``xlaprof.Analysis``, ``xlaprof.check``, ``xlaprof.analyze``): what a
notebook or a user's own test calls."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from builders import copy_run
from helpers import REPO, SAMPLES, line_of, sample_run

import xlaprof
from xlaprof.errors import BudgetError


def test_the_facade_says_which_process_it_keeps(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    for rank in (0, 1):
        target = copy_run(tmp_path / f"r{rank}")
        info = json.loads((target / "run.json").read_text())
        info["rank"] = rank
        (target / "run.json").write_text(json.dumps(info))
        shutil.move(target, tmp_path / "job" / f"proc{rank}")
    with pytest.warns(UserWarning, match=r"2 process runs \(proc0, proc1\): showing proc0 only"):
        analysis = xlaprof.Analysis(tmp_path / "job")
    assert analysis.processes == ["proc0", "proc1"]


def test_facade_tables_and_figures() -> None:
    analysis = xlaprof.Analysis(SAMPLES / "runs" / "recompile_varying_batch")
    assert list(analysis.findings()["kind"]) == ["recompilation"]
    assert len(analysis.steps()) == 12 and len(analysis.timeline()) == 12
    assert list(analysis.compiles()["step"])[:2] == [0, 1]
    timeline = analysis.plot_timeline()
    names = [trace.name for trace in timeline.data]
    assert {"compile", "Python + tracing", "step time"} <= set(names)
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


def test_python_api_for_pytest() -> None:
    # (the repository as the source root: the sample was recorded in another checkout)
    result = xlaprof.check(
        sample_run("recompile_varying_batch"), max_recompilations=0, max_graphs=9, source_root=REPO
    )
    assert not result.ok and not result
    (failure,) = result.failures
    assert failure.budget == "max-recompilations" and failure.value == 3 and failure.limit == 0
    assert failure.findings[0].location is not None
    assert failure.findings[0].location.line == line_of(
        "recompile_varying_batch", "x, y = make_batch(next(sizes), device)"
    )
    text = str(result)
    assert "FAIL  max-recompilations" in text and "why: recompilation" in text
    assert text.splitlines()[-1].startswith("xlaprof check: FAILED")
    assert xlaprof.check(sample_run("healthy_loop"), max_recompilations=0).ok
    with pytest.raises(BudgetError):
        xlaprof.check(sample_run("healthy_loop"))  # nothing to check
    with pytest.raises(BudgetError):
        xlaprof.check(sample_run("healthy_loop"), max_step_time_ratio=1.1)  # no baseline


def test_python_api_reads_a_budget_file_and_overrides_it(tmp_path: Path) -> None:
    budget = tmp_path / "budget.toml"
    budget.write_text("[tool.xlaprof.check]\nmax-recompilations = 0\n")
    run = sample_run("recompile_varying_batch")
    assert not xlaprof.check(run, budget_file=budget).ok
    assert xlaprof.check(run, budget_file=budget, max_recompilations=3).ok


def test_a_failed_check_reads_as_its_whole_report_in_a_pytest_failure(tmp_path: Path) -> None:
    # GIVEN a user's test that checks a run with a budget it breaks, the way docs/ci.md shows
    test_file = tmp_path / "test_budget.py"
    test_file.write_text(
        "import xlaprof\n\n"
        "def test_budget():\n"
        f"    result = xlaprof.check({str(sample_run('recompile_varying_batch'))!r},"
        " max_recompilations=0, max_graphs=1)\n"
        "    assert result.ok, result\n"
    )
    # WHEN pytest runs it (a fresh process, its default verbosity)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    # THEN the failure shows every line of the report, none cut, with the explaining finding
    assert run.returncode == 1, run.stdout + run.stderr
    expected = str(
        xlaprof.check(sample_run("recompile_varying_batch"), max_recompilations=0, max_graphs=1)
    )
    for line in expected.splitlines():
        assert line.strip() in run.stdout, line
    assert "why: recompilation" in run.stdout and "FAILED: 2 over budget" in run.stdout


def test_the_notebook_facade_has_the_host_and_compile_tables() -> None:
    from helpers import SAMPLES

    import xlaprof

    # GIVEN a CPU-only capture with its run's TORCH_TRACE log (sample_traces/host_capture)
    analysis = xlaprof.Analysis(SAMPLES / "host_capture")
    # THEN the facade hands over the tables the report shows, as DataFrames
    assert len(analysis.host_activity()) == 12
    assert set(analysis.host_hot()["kind"]) <= {"python", "aten"}
    compiles = analysis.torch_compiles()
    assert compiles.set_index("compile_id").loc["0/1", "step"] == 8
    # and a run directory without them gives empty frames, not errors
    empty = xlaprof.Analysis(SAMPLES / "healthy_loop.log")
    assert empty.host_activity().empty and empty.torch_compiles().empty
