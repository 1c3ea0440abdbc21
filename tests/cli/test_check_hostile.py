"""`xlaprof check` in a repository or on a run someone sent: the checkout's pyproject.toml and a
budget file are read as hostile input, and nothing from the run can forge CI output.

Each test is one attack of issue 38: a pyproject.toml nested 100,000 deep, a 3 GB sparse one
under a 2 GB address-space cap, a FIFO named as the budget file, and a process folder whose
name holds newlines and GitHub workflow commands.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from helpers import cli, sample_run

from xlaprof.errors import BudgetError

BUDGET_ERROR = BudgetError.exit_code
OVER_BUDGET = 1
ADDRESS_SPACE_CAP = 2 * 1024**3


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xlaprof: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_a_pyproject_nested_100000_deep_is_a_budget_error(tmp_path: Path) -> None:
    # GIVEN a checkout whose pyproject.toml holds arrays nested 100,000 deep
    depth = 100_000
    (tmp_path / "pyproject.toml").write_text("a = " + "[" * depth + "]" * depth + "\n")
    # WHEN `xlaprof check` runs in it
    result = cli("check", str(sample_run("healthy_loop")), "--max-graphs", "9", cwd=tmp_path)
    # THEN one line says the file is not valid TOML, with the budget error's code
    assert result.returncode == BUDGET_ERROR, result.stderr
    line = _one_line_error(result)
    assert "pyproject.toml" in line and "nested too deep" in line


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))


def test_a_3_gb_sparse_pyproject_under_a_2_gb_cap_is_a_budget_error(tmp_path: Path) -> None:
    # GIVEN a checkout whose pyproject.toml is a 3 GB sparse file (no disk used)
    with (tmp_path / "pyproject.toml").open("wb") as handle:
        handle.truncate(3 * 1024**3)
    # WHEN `xlaprof check` runs in it with its address space capped at 2 GB
    result = subprocess.run(
        [sys.executable, "-m", "xlaprof", "check", str(sample_run("healthy_loop"))],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PJRT_DEVICE": "CPU"},
        preexec_fn=_capped,
        timeout=300,
    )
    # THEN the file is refused by its size, before it is read: one line, the budget error's code
    assert result.returncode == BUDGET_ERROR, result.stderr
    line = _one_line_error(result)
    assert "pyproject.toml" in line and "larger than" in line


def test_a_fifo_as_budget_file_is_refused_without_blocking(tmp_path: Path) -> None:
    # GIVEN a FIFO named as the budget file (no writer will ever open it)
    fifo = tmp_path / "budget.toml"
    os.mkfifo(fifo)
    # WHEN `xlaprof check --budget` reads it
    result = cli("check", str(sample_run("healthy_loop")), "--budget", str(fifo), timeout=120)
    # THEN it returns (the open does not wait for a writer) with one line and the budget code
    assert result.returncode == BUDGET_ERROR, result.stderr
    assert "not a regular file" in _one_line_error(result)


# -- forged CI output ------------------------------------------------------------------------

FORGED = "p0\n::error file=x.py,line=1::forged\n::stop-commands::TOKEN\nreal"


def _forged_run(tmp_path: Path) -> Path:
    """A folder of one process run whose folder name holds newlines and workflow commands."""
    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copytree(sample_run("host_sync_item"), folder / FORGED)
    return folder


def test_workflow_commands_in_a_process_name_cannot_reach_the_runner(tmp_path: Path) -> None:
    # GIVEN a run whose process folder name holds `::error` and `::stop-commands::` lines
    runs = _forged_run(tmp_path)
    # WHEN `xlaprof check` fails a budget on it under GitHub Actions
    result = cli(
        "check", "--no-config", str(runs), "--max-host-syncs-per-step", "0",
        env={"GITHUB_ACTIONS": "true"},
    )  # fmt: skip
    assert result.returncode == OVER_BUDGET, result.stderr
    lines = result.stdout.splitlines()
    # THEN the runner sees exactly one workflow command, xlaprof's own annotation: no line the
    # data made starts one (the runner trims leading white space before looking for "::")
    commands = [line for line in lines if line.lstrip().startswith("::")]
    assert len(commands) == 1 and commands[0].startswith("::error file="), result.stdout
    assert "stop-commands" not in commands[0].split("::")[1]
    # and no newline from the name reached the text: the name is on one line, shown escaped
    named = [line for line in lines if "stop-commands" in line and "\\x0a" in line]
    assert named, result.stdout
    assert not any(line.startswith(("real", "p0")) for line in lines)


def test_text_output_shows_newlines_and_controls_from_data_escaped(tmp_path: Path) -> None:
    # GIVEN the same run, and its text report outside GitHub Actions
    runs = _forged_run(tmp_path)
    result = cli("check", "--no-config", str(runs), "--max-graphs", "99")
    assert result.returncode == 0, result.stderr
    # THEN each line of the report is one line of xlaprof's, the name within it escaped
    assert all(not line.lstrip().startswith("::") for line in result.stdout.splitlines())
    assert "p0\\x0a::error file=x.py,line=1::forged\\x0a::stop-commands::TOKEN\\x0areal" in (
        result.stdout
    )


def test_nothing_blocks_reading_a_budget_in_a_thread(tmp_path: Path) -> None:
    # The library call the MCP server makes: it must return, not wait for a FIFO's writer.
    from xlaprof.budgets import Budgets

    fifo = tmp_path / "pyproject.toml"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            Budgets.from_file(fifo)
        except BaseException as error:
            outcome.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(60)
    assert not reader.is_alive() and isinstance(outcome[0], BudgetError)


def test_analyze_text_output_cannot_start_a_workflow_command(tmp_path: Path) -> None:
    # GIVEN the same run; WHEN `xlaprof analyze` prints its report under GitHub Actions
    runs = _forged_run(tmp_path)
    result = cli("analyze", str(runs), env={"GITHUB_ACTIONS": "true"})
    assert result.returncode == 0, result.stderr
    # THEN the process name shows on its line, its newlines escaped, and no line of the
    # report starts a command
    assert "::stop-commands::TOKEN\\x0areal" in result.stdout
    assert not any(line.startswith("real") for line in result.stdout.splitlines())
    assert not any(line.lstrip().startswith("::") for line in result.stdout.splitlines())
