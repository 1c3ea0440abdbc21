"""`xlaprof check`: each budget passing and failing on real runs of the examples.

Most budgets are checked on the sample runs (``sample_traces/runs``: real `xlaprof run`
captures of the examples). The step-time baseline and the `--max-steps` CI flow use the two
recorded runs of `examples/ci_check.py` (``sample_traces/ci_check``): as it is and with a slow
input pipeline (``CI_CHECK_LOADER_DELAY_S``). They are recorded, not made during the tests: a
ratio of step times measured on this machine would be decided by how busy the machine is.
Expected values come from what the scripts do (one `.item()` per step, four batch sizes, one
`torch.median` per step, a 1 s sleep in each slow step), not from what xlaprof printed.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import EXAMPLES, REPO, SAMPLES, cli, line_of, missing_input, sample_run

from xlaprof.budgets import Budgets
from xlaprof.errors import BudgetError

OVER_BUDGET = 1
BUDGET_ERROR = BudgetError.exit_code
# ci_check.py slept this long in each step of its recorded slow run, which stopped after this
# many steps (sample_traces/regenerate.py: CI_CHECK, --max-steps).
LOADER_DELAY_S = "1.0"
CI_STEPS = 6


def check(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    # --no-config: the repository's own pyproject.toml must not leak budgets into the tests.
    return cli("check", "--no-config", *args, env=env, cwd=cwd)


def budget_line(stdout: str, budget: str) -> str:
    return next(line for line in stdout.splitlines() if f" {budget} " in line)


@pytest.fixture(scope="session")
def ci_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """examples/ci_check.py's recorded runs under `xlaprof run --max-steps`, as docs/ci.md runs
    it: as it is (base), and with each batch arriving CI_CHECK_LOADER_DELAY_S later (slow).
    Copied into a folder of the test session's, where a test writes a budget file beside them."""
    root = tmp_path_factory.mktemp("ci")
    for name in ("base", "slow"):
        source = SAMPLES / "ci_check" / name
        if not any(source.glob("*/run.json")):
            missing_input(source, "a recorded run of examples/ci_check.py (make samples)")
        shutil.copytree(source, root / name)
    return {name: root / name for name in ("base", "slow")}


# -- recompilations ---------------------------------------------------------------------------


def test_varying_batch_fails_max_recompilations_0_and_healthy_loop_passes() -> None:
    # GIVEN the varying-batch example: batch sizes cycle 256, 192, 136, 256, 72. Steps 0-1 are
    # warm-up; each later step with a size not yet compiled with the optimizer state (136, 256,
    # 72) compiles once: 3 recompilations. The healthy loop compiles only at steps 0 and 1.
    varying, healthy = sample_run("recompile_varying_batch"), sample_run("healthy_loop")
    # WHEN each is checked with no recompilation allowed
    # (the repository as the source root: the samples were recorded in another checkout)
    bad = check(str(varying), "--max-recompilations", "0", "--source-root", str(REPO))
    good = check(str(healthy), "--max-recompilations", "0")
    # THEN the varying batch is over budget, at the user's sync line, and the healthy loop passes
    assert bad.returncode == OVER_BUDGET, bad.stderr
    line = budget_line(bad.stdout, "max-recompilations")
    assert line.split()[0] == "FAIL" and "3 > 0" in line and "at steps 2, 3, 4" in line
    cause_line = line_of("recompile_varying_batch", "x, y = make_batch(next(sizes), device)")
    assert f"recompile_varying_batch.py:{cause_line}" in bad.stdout
    assert "why: recompilation" in bad.stdout
    assert good.returncode == 0, good.stdout + good.stderr
    assert budget_line(good.stdout, "max-recompilations").split()[:2] == [
        "pass",
        "max-recompilations",
    ]
    assert "0 ≤ 0" in budget_line(good.stdout, "max-recompilations")


def test_recompilations_after_a_longer_warmup_pass() -> None:
    # Steps 2-4 compile; with warm-up covering steps 0-4 nothing compiles after it.
    result = check(
        str(sample_run("recompile_varying_batch")),
        "--max-recompilations",
        "0",
        "--warmup-steps",
        "5",
    )
    assert result.returncode == 0, result.stdout


# -- host syncs -------------------------------------------------------------------------------


def test_item_every_step_fails_the_host_sync_budget() -> None:
    # GIVEN host_sync_item.py, which calls loss.item() once in every step
    result = check(str(sample_run("host_sync_item")), "--max-host-syncs-per-step", "0.5")
    assert result.returncode == OVER_BUDGET
    line = budget_line(result.stdout, "max-host-syncs-per-step")
    # one read per step after warm-up, each an .item() (10 steps: 12 recorded, 2 warm-up)
    assert "1 > 0.50" in line and "10 by .item()" in line
    assert f"host_sync_item.py:{line_of('host_sync_item', 'loss.item()')}" in result.stdout
    # the same script is within a budget of one read per step
    assert (
        check(str(sample_run("host_sync_item")), "--max-host-syncs-per-step", "1").returncode == 0
    )


def test_healthy_loop_has_no_host_sync_in_its_steps() -> None:
    # Its only read (the final loss print) comes after the last step.
    result = check(str(sample_run("healthy_loop")), "--max-host-syncs-per-step", "0")
    assert result.returncode == 0, result.stdout
    assert "0 ≤ 0" in budget_line(result.stdout, "max-host-syncs-per-step")


def test_a_cpu_fallback_is_a_host_sync_too() -> None:
    # torch.median falls back to the CPU: its input is copied to the host once per step.
    result = check(str(sample_run("cpu_fallback")), "--max-host-syncs-per-step", "0")
    assert result.returncode == OVER_BUDGET
    assert "0 by .item(), 10 CPU-fallback calls" in budget_line(
        result.stdout, "max-host-syncs-per-step"
    )
    assert "why: aten_fallback: aten::median" in result.stdout


# -- fallbacks --------------------------------------------------------------------------------


def test_fallback_budget_and_allow_list() -> None:
    run = str(sample_run("cpu_fallback"))
    over = check(run, "--max-fallback-ops", "0")
    assert over.returncode == OVER_BUDGET
    line = budget_line(over.stdout, "max-fallback-ops")
    assert "1 > 0" in line and "aten::median ×12" in line  # one op, once in each of 12 steps
    assert f"cpu_fallback.py:{line_of('cpu_fallback', 'scale = torch.median')}" in over.stdout
    # allowed by name, with or without the aten:: prefix, or by a budget of one op
    for allowed in (["--allow-fallback", "median"], ["--allow-fallback", "aten::median"]):
        assert check(run, *allowed).returncode == 0
    assert check(run, "--max-fallback-ops", "1").returncode == 0
    # an allow-list of other ops still fails
    assert check(run, "--allow-fallback", "aten::nonzero").returncode == OVER_BUDGET
    assert check(str(sample_run("healthy_loop")), "--max-fallback-ops", "0").returncode == 0


# -- graphs, forbid, compile time ---------------------------------------------------------------


def test_graph_budget() -> None:
    # 2 warm-up graphs + 3 batch sizes compiled after it = 5 distinct graphs
    run = str(sample_run("recompile_varying_batch"))
    over = check(run, "--max-graphs", "4")
    assert over.returncode == OVER_BUDGET and "5 > 4" in budget_line(over.stdout, "max-graphs")
    assert check(run, "--max-graphs", "5").returncode == 0
    assert check(str(sample_run("healthy_loop")), "--max-graphs", "2").returncode == 0


def test_forbid_a_finding_kind() -> None:
    tiny_ops = check(str(sample_run("tracing_bound_tiny_ops")), "--forbid", "tracing_bound")
    assert tiny_ops.returncode == OVER_BUDGET
    line = budget_line(tiny_ops.stdout, "forbid tracing_bound")
    assert line.split()[0] == "FAIL" and "1 > 0" in line
    healthy = check(
        str(sample_run("healthy_loop")), "--forbid", "tracing_bound", "--forbid", "unrolled_loop"
    )
    assert healthy.returncode == 0, healthy.stdout
    unrolled = check(str(sample_run("unrolled_layers")), "--forbid", "unrolled_loop")
    assert unrolled.returncode == OVER_BUDGET
    assert f"unrolled_layers.py:{line_of('unrolled_layers', 'for blk in self.blocks:')}" in (
        unrolled.stdout
    )


def test_unknown_finding_kind_is_a_usage_error() -> None:
    result = check(str(sample_run("healthy_loop")), "--forbid", "slow")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_compile_seconds_budget_on_a_real_run() -> None:
    # Any compilation takes some time: a budget of 0 s fails, an hour passes.
    run = str(sample_run("healthy_loop"))
    over = check(run, "--max-compile-seconds", "0")
    assert over.returncode == OVER_BUDGET
    assert "2 compilations" in budget_line(over.stdout, "max-compile-seconds")
    assert check(run, "--max-compile-seconds", "3600").returncode == 0


# -- step time against a baseline ------------------------------------------------------------


def test_a_slower_run_fails_the_baseline_comparison(ci_runs) -> None:
    # GIVEN ci_check.py, and the same script with a slow input pipeline (+1 s per step)
    result = check(
        str(ci_runs["slow"]), "--baseline", str(ci_runs["base"]), "--max-step-time-ratio", "1.5"
    )
    # THEN the slow run is over budget, and both medians are shown with their spread
    assert result.returncode == OVER_BUDGET, result.stdout
    line = budget_line(result.stdout, "max-step-time-ratio")
    assert line.split()[0] == "FAIL"
    assert line.count("(IQR ") == 2 and "4 steps" in line  # 6 steps - 2 warm-up, no compiles
    document = json.loads(
        check(
            str(ci_runs["slow"]), "--baseline", str(ci_runs["base"]),
            "--max-step-time-ratio", "1.5", "--json",
        ).stdout
    )  # fmt: skip
    evidence = document["runs"][0]["budgets"][0]["evidence"]
    assert evidence["median_s"] >= float(LOADER_DELAY_S)  # the sleep is inside each step
    assert evidence["spread_s"] is not None and evidence["baseline_spread_s"] is not None


def test_baseline_from_a_budget_file_is_relative_to_the_file(ci_runs, tmp_path: Path) -> None:
    budget = ci_runs["base"].parent / "budget.toml"
    budget.write_text('[tool.xlaprof.check]\nbaseline = "base"\nmax-step-time-ratio = 1.5\n')
    result = check(str(ci_runs["slow"]), "--budget", str(budget), cwd=tmp_path)
    assert result.returncode == OVER_BUDGET, result.stdout + result.stderr
    assert budget_line(result.stdout, "max-step-time-ratio").split()[0] == "FAIL"


def test_the_faster_run_and_the_run_itself_pass_against_a_baseline(ci_runs) -> None:
    faster = check(
        str(ci_runs["base"]), "--baseline", str(ci_runs["slow"]), "--max-step-time-ratio", "1.5"
    )
    assert faster.returncode == 0, faster.stdout
    itself = check(
        str(ci_runs["base"]), "--baseline", str(ci_runs["base"]), "--max-step-time-ratio", "1"
    )
    assert itself.returncode == 0 and "1.00x ≤ 1.00x" in itself.stdout


# -- not measured ----------------------------------------------------------------------------


def test_a_budget_that_was_not_measured_fails_unless_allowed(samples) -> None:
    # GIVEN a log file: it has compilation counts but no per-step rows
    log = str(samples / "healthy_loop.log")
    # WHEN a per-step budget is checked on it
    strict = check(log, "--max-recompilations", "0", "--max-graphs", "2")
    # THEN it fails as not measured (never as 0), while the graph budget is measured
    assert strict.returncode == OVER_BUDGET
    line = budget_line(strict.stdout, "max-recompilations")
    assert line.split()[0] == "FAIL" and "not measured" in line and "per-step" in line
    assert budget_line(strict.stdout, "max-graphs").split()[0] == "pass"
    allowed = check(log, "--max-recompilations", "0", "--max-graphs", "2", "--allow-unmeasured")
    assert allowed.returncode == 0, allowed.stdout
    assert budget_line(allowed.stdout, "max-recompilations").split()[0] == "skip"


def test_forbid_tracing_bound_needs_steady_steps() -> None:
    # unrolled_layers runs 4 steps: 2 after warm-up, fewer than the analyzer needs for a verdict
    result = check(str(sample_run("unrolled_layers")), "--forbid", "tracing_bound")
    assert result.returncode == OVER_BUDGET
    assert "not measured" in budget_line(result.stdout, "forbid tracing_bound")


# -- outputs: JSON, JUnit, GitHub Actions ------------------------------------------------------


def test_json_document() -> None:
    result = check(
        str(sample_run("host_sync_item")), "--max-host-syncs-per-step", "0",
        "--max-recompilations", "0", "--json",
    )  # fmt: skip
    assert result.returncode == OVER_BUDGET
    document = json.loads(result.stdout)  # stdout is the document and nothing else
    assert document["schema"] == "xlaprof.check/1" and document["ok"] is False
    assert isinstance(document["summary"], str)
    (run,) = document["runs"]
    assert run["ok"] is False and run["steps"] == 12 and run["status"] == "ok"
    budgets = {b["budget"]: b for b in run["budgets"]}
    assert set(budgets) == {"max-host-syncs-per-step", "max-recompilations"}
    for budget in budgets.values():
        assert budget["status"] in ("pass", "fail", "unmeasured", "skipped")
        assert isinstance(budget["ok"], bool) and isinstance(budget["measured"], str)
        assert budget["value"] is None or isinstance(budget["value"], int | float)
        assert isinstance(budget["limit"], int | float) and budget["unit"] in ("", "s", "x")
        assert isinstance(budget["evidence"], dict) and isinstance(budget["findings"], list)
    syncs = budgets["max-host-syncs-per-step"]
    assert syncs["status"] == "fail" and syncs["value"] == 1 and syncs["limit"] == 0
    (finding,) = syncs["findings"]
    assert finding["kind"] == "host_sync"
    assert finding["location"]["line"] == line_of("host_sync_item", "loss.item()")
    assert budgets["max-recompilations"]["status"] == "pass"
    assert budgets["max-recompilations"]["findings"] == []


def test_junit_file_parses_and_names_the_failing_budget(tmp_path: Path) -> None:
    junit = tmp_path / "check.xml"
    result = check(
        str(sample_run("recompile_varying_batch")), "--max-recompilations", "0",
        "--max-fallback-ops", "0", "--junit", str(junit), "--source-root", str(REPO),
        "--json",
    )  # fmt: skip
    assert result.returncode == OVER_BUDGET
    where = json.loads(result.stdout)["runs"][0]["budgets"][0]["findings"][0]["location"]
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("2", "1", "0")
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert set(cases) == {"max-recompilations", "max-fallback-ops"}
    failure = cases["max-recompilations"].find("failure")
    assert failure is not None and failure.get("type") == "over_budget"
    assert failure.get("message", "").startswith("max-recompilations: 3 > 0")
    cause_line = line_of("recompile_varying_batch", "x, y = make_batch(next(sizes), device)")
    assert f"recompile_varying_batch.py:{cause_line}" in failure.get("message", "")
    # the line is said as every other form says it: what it is to the finding
    assert where["line"] == cause_line and where["what"]
    assert f"{where['file']}:{cause_line} ({where['what']})" in failure.get("message", "")
    assert "fix:" in (failure.text or "")  # the finding's suggestion is in the body
    assert cases["max-recompilations"].get("line") == str(cause_line)
    assert cases["max-fallback-ops"].find("failure") is None
    # a CI job that runs again rewrites its own report there...
    again = check(str(sample_run("healthy_loop")), "--max-graphs", "9", "--junit", str(junit))
    assert again.returncode == 0, again.stderr
    cases = [case.get("name") for case in ET.parse(junit).getroot().iter("testcase")]
    assert cases == ["max-graphs"]
    # ...but a file that is not one of its reports is kept without --force
    notes = tmp_path / "notes.xml"
    notes.write_text("<notes>mine</notes>\n")
    kept = check(str(sample_run("healthy_loop")), "--max-graphs", "9", "--junit", str(notes))
    assert kept.returncode == 11 and "--force" in kept.stderr
    assert notes.read_text() == "<notes>mine</notes>\n"


def test_junit_marks_allowed_unmeasured_budgets_skipped(tmp_path: Path, samples) -> None:
    junit = tmp_path / "check.xml"
    result = check(
        str(samples / "healthy_loop.log"), "--max-recompilations", "0", "--allow-unmeasured",
        "--junit", str(junit),
    )  # fmt: skip
    assert result.returncode == 0
    (case,) = ET.parse(junit).getroot().iter("testcase")
    assert case.find("skipped") is not None and case.find("failure") is None


def test_github_actions_annotations_point_at_the_users_line() -> None:
    run = sample_run("host_sync_item")
    document = json.loads(check(str(run), "--max-host-syncs-per-step", "0", "--json").stdout)
    location = document["runs"][0]["budgets"][0]["findings"][0]["location"]
    workspace = Path(location["file"]).parent.parent  # the checkout holding examples/
    env = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workspace)}
    result = check(str(run), "--max-host-syncs-per-step", "0", "--max-graphs", "9", env=env)
    annotations = [line for line in result.stdout.splitlines() if line.startswith("::")]
    assert len(annotations) == 1  # the failed budget only
    line = line_of("host_sync_item", "loss.item()")
    assert annotations[0].startswith(
        f"::error file=examples/host_sync_item.py,line={line},"
        "title=xlaprof check%3A max-host-syncs-per-step::max-host-syncs-per-step: 1 > 0"
    )
    outside = check(str(run), "--max-host-syncs-per-step", "0", env={"GITHUB_ACTIONS": ""})
    assert not any(line.startswith("::") for line in outside.stdout.splitlines())


# -- budgets from files ------------------------------------------------------------------------


def test_budgets_from_pyproject_and_flags_over_them(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.xlaprof.check]\nmax-recompilations = 0\n'
        'forbid = ["tracing_bound"]\n'
    )
    nested = tmp_path / "sub"
    nested.mkdir()
    run = str(sample_run("recompile_varying_batch"))
    from_file = cli("check", run, cwd=nested)  # found in a parent folder
    assert from_file.returncode == OVER_BUDGET
    assert "3 > 0" in budget_line(from_file.stdout, "max-recompilations")
    assert "forbid tracing_bound" in from_file.stdout
    overridden = cli("check", run, "--max-recompilations", "3", cwd=nested)
    assert overridden.returncode == 0, overridden.stdout
    ignored = cli("check", run, "--no-config", "--max-graphs", "5", cwd=nested)
    assert ignored.returncode == 0 and "max-recompilations" not in ignored.stdout


def test_example_budget_file_passes_on_the_ci_run(ci_runs) -> None:
    # The docs' flow: a few steps under `xlaprof run --max-steps`, then the example's budgets.
    result = check(str(ci_runs["base"]), "--budget", str(EXAMPLES / "ci_check.toml"))
    assert result.returncode == 0, result.stdout
    assert f"({CI_STEPS} steps, ended max_steps)" in result.stdout
    assert len([ln for ln in result.stdout.splitlines() if ln.startswith("  pass")]) == 6


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("max-recompilation = 0\n", "unknown budget 'max-recompilation'"),
        ("max-recompilations = -1\n", "max-recompilations"),
        ("max-graphs = 'two'\n", "max-graphs"),
        ('forbid = ["slow"]\n', "unknown finding kind 'slow'"),
        ("max-step-time-ratio = 1.2\n", "needs a baseline"),
        ("max-graphs = \n", "not valid TOML"),
        ("", "no budget to check"),
    ],
)
def test_invalid_budgets_are_one_line_errors(tmp_path: Path, content: str, message: str) -> None:
    budget = tmp_path / "budget.toml"
    budget.write_text(content)
    result = check(str(sample_run("healthy_loop")), "--budget", str(budget))
    assert result.returncode == BUDGET_ERROR, result.stdout + result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_missing_run_and_missing_baseline_are_input_errors(tmp_path: Path) -> None:
    missing = check(str(tmp_path / "nope"), "--max-graphs", "1")
    assert missing.returncode == 3 and "nope" in missing.stderr
    no_baseline = check(
        str(sample_run("healthy_loop")), "--baseline", str(tmp_path / "nope"),
        "--max-step-time-ratio", "1.1",
    )  # fmt: skip
    assert no_baseline.returncode == 3


# -- the Python API ----------------------------------------------------------------------------


def test_several_runs_must_all_pass() -> None:
    result = check(
        str(sample_run("healthy_loop")),
        str(sample_run("host_sync_item")),
        "--max-host-syncs-per-step",
        "0",
    )
    assert result.returncode == OVER_BUDGET
    assert "healthy_loop" in result.stdout and "host_sync_item" in result.stdout
    assert result.stdout.count("max-host-syncs-per-step") == 2


def test_every_limit_has_a_measure_and_an_option() -> None:
    # GIVEN the budgets' limits WHEN they are listed against the measures and the CLI's options
    from xlaprof.budgets import LIMITS, MEASURES
    from xlaprof.cli.check import check as command

    options = {param.name for param in command.params}
    # THEN each limit is measured and settable from the command line, and nothing else is
    assert set(MEASURES) == set(LIMITS)
    assert {name.replace("-", "_") for name in Budgets.options()} <= options
