"""The tests' ``cli`` helper runs the analysis commands in the test's own process: it must
answer as a fresh ``python -m xlaprof`` does, or every test that uses it tests something else.
Each case runs the same call both ways and compares what a user would see."""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers import cli, sample_run


def test_a_document_and_its_exit_code_are_the_same_in_this_process_and_in_a_new_one() -> None:
    # GIVEN a recorded run (a fixed input: nothing in its findings depends on this machine)
    run = str(sample_run("recompile_varying_batch"))
    # WHEN it is analyzed here and in a process of its own
    here = cli("analyze", "--json", run)
    apart = cli("analyze", "--json", run, process=True)
    # THEN both succeed with the same whole document (findings, story, timeline, tables)
    assert (here.returncode, apart.returncode) == (0, 0), (here.stderr, apart.stderr)
    mine, theirs = json.loads(here.stdout), json.loads(apart.stdout)
    assert mine["findings"] and mine["timeline"], "the run has findings and steps to compare"
    assert mine == theirs
    assert here.stderr == apart.stderr


def test_an_error_is_the_same_line_and_exit_code_in_this_process_and_in_a_new_one(
    tmp_path: Path,
) -> None:
    # GIVEN a path that does not exist
    missing = str(tmp_path / "nothing-here")
    # WHEN it is analyzed both ways
    here = cli("analyze", missing)
    apart = cli("analyze", missing, process=True)
    # THEN the same one-line error and exit code, no traceback
    assert here.returncode == apart.returncode != 0
    assert here.stderr == apart.stderr
    assert len(here.stderr.strip().splitlines()) == 1 and "Traceback" not in here.stderr
    assert here.stdout == apart.stdout


def test_the_working_directory_and_environment_are_put_back(tmp_path: Path) -> None:
    # GIVEN this process's working directory and environment
    cwd, environment = Path.cwd(), dict(os.environ)
    # WHEN a call runs elsewhere with its own variables
    cli("analyze", "nothing-here", cwd=tmp_path, env={"XLAPROF_TEST_MARK": "1"})
    # THEN both are as they were
    assert Path.cwd() == cwd
    assert dict(os.environ) == environment
