"""``xlaprof check RUN... --max-recompilations 0 ...``: a CI gate on what a run may cost."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

import click

from xlaprof.cli.common import with_options
from xlaprof.findings import Kind

OVER_BUDGET_EXIT = 1


def _our_junit(head: str) -> bool:
    """A JUnit file this command wrote (a CI job that runs again rewrites it)."""
    return head.startswith("<?xml") and '<testsuites name="xlaprof check"' in head


def _positive(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise click.BadParameter("must be a number, 0 or more")
    return value


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--max-recompilations",
    type=click.IntRange(min=0),
    metavar="N",
    help="Compilations allowed after the warm-up steps.",
)
@click.option(
    "--max-host-syncs-per-step",
    type=float,
    callback=_positive,
    metavar="X",
    help="Device→host reads (.item(), .cpu(), print, fallback copies) per step after warm-up, "
    "on average.",
)
@click.option(
    "--max-fallback-ops",
    type=click.IntRange(min=0),
    metavar="N",
    help="Distinct aten:: ops allowed to run on the CPU (not counting --allow-fallback).",
)
@click.option(
    "--allow-fallback",
    multiple=True,
    metavar="OP",
    help="An op allowed to fall back to the CPU (repeatable), e.g. aten::median; alone it "
    "means: no other op may.",
)
@click.option(
    "--max-graphs", type=click.IntRange(min=0), metavar="N", help="Distinct graphs compiled."
)
@click.option(
    "--forbid",
    multiple=True,
    type=click.Choice([k.value for k in Kind]),
    help="A finding kind that must not appear (repeatable).",
)
@click.option(
    "--baseline",
    type=click.Path(path_type=Path),
    metavar="RUN",
    help="A run to compare step time with (needs --max-step-time-ratio).",
)
@click.option(
    "--max-step-time-ratio",
    type=float,
    callback=_positive,
    metavar="R",
    help="Median steady step of RUN / that of --baseline, at most R (e.g. 1.1).",
)
@click.option(
    "--max-compile-seconds",
    type=float,
    callback=_positive,
    metavar="S",
    help="Total compile time of the run, in seconds.",
)
@click.option(
    "--warmup-steps",
    type=click.IntRange(min=0),
    metavar="N",
    help="How many steps are warm-up: the first N the run holds (default 2).",
)
@click.option(
    "--allow-unmeasured",
    is_flag=True,
    default=None,
    help="Skip a budget whose figure the run did not measure, instead of failing it.",
)
@click.option(
    "--budget",
    "budget_file",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Read budgets from this TOML file (its [tool.xlaprof.check] table, or its top level) "
    "instead of the project's pyproject.toml.",
)
@click.option("--no-config", is_flag=True, help="Ignore [tool.xlaprof.check] in pyproject.toml.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (xlaprof.check/1).")
@click.option(
    "--junit",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Write JUnit XML: one testcase per budget, the finding in the failure message "
    "(a report of this command's already there is rewritten).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Overwrite the --junit file if it exists and is not a report of this command's.",
)
@with_options("process", "session", "source_root", "max_size")
def check(
    runs: tuple[Path, ...],
    budget_file: Path | None,
    no_config: bool,
    as_json: bool,
    junit: Path | None,
    force: bool,
    process: str | None,
    session: str | None,
    source_root: Path | None,
    max_size: int | None,
    **limits: Any,
) -> None:
    """Check RUNs (run directories from `xlaprof run`) against budgets, for CI.

    Budgets come from the options, over those of `[tool.xlaprof.check]` in the nearest
    pyproject.toml (or of --budget FILE). Prints one line per budget (value, limit, verdict) and,
    for a failure, the finding that explains it at your source line. Exit status: 0 within
    budget, 1 over budget or not measured (see --allow-unmeasured), other codes for errors.
    Under GitHub Actions (GITHUB_ACTIONS=true) failures are also annotations on your code.

    \b
    Example:
      xlaprof run --max-steps 8 --out runs/ci -- python train.py
      xlaprof check runs/ci --max-recompilations 0 --max-host-syncs-per-step 0
    """
    from xlaprof.budgets import Budgets, find_pyproject
    from xlaprof.cli.common import emit, request_from, say
    from xlaprof.pipeline import check as check_runs

    if budget_file is not None:
        budgets = Budgets.from_file(budget_file)
    else:
        pyproject = None if no_config else find_pyproject(Path.cwd())
        budgets = Budgets() if pyproject is None else Budgets.from_file(pyproject)
    budgets = budgets.updated(**limits)  # the options over the file
    settings = {"process": process, "session": session, "source_root": source_root}
    request = request_from(runs, {**settings, "max_size": max_size})
    result = check_runs(request, budgets, say)
    if junit is not None:
        emit(result, "junit", junit, force, owned=_our_junit)
    emit(result, "json" if as_json else "text")
    if not as_json and os.environ.get("GITHUB_ACTIONS") == "true":
        emit(result, "github")
    if not result.ok:
        sys.exit(OVER_BUDGET_EXIT)
