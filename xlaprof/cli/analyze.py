"""``xlaprof analyze PATH...``: diagnose metrics reports, PT_XLA_DEBUG logs and run directories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from xlaprof.cli.common import analysis_options, emit


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON document (xlaprof.analysis/1)."
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the JSON document to this file (atomically) instead of stdout.",
)
@click.option("--force", is_flag=True, help="Overwrite --output if it exists.")
@click.option("-v", "--verbose", is_flag=True, help="List every line that could not be read.")
@analysis_options
def analyze(
    paths: tuple[Path, ...],
    as_json: bool,
    output: Path | None,
    force: bool,
    verbose: bool,
    **settings: Any,
) -> None:
    """Diagnose PATHs: metrics reports, PT_XLA_DEBUG logs (auto-detected), run directories,
    or profiler captures (.xplane.pb, *trace.json.gz, or a folder of them).

    Files are taken as the output of one job and analyzed together. A run directory written by
    `xlaprof run` or `xlaprof.profile()` gives exact per-step findings. A capture gives each
    device's steps, busy and idle time and top ops. A folder that holds several runs is read
    at its latest (--process for another). A saved `--json` document is shown again as it was.
    """
    from xlaprof.cli.common import result_of
    from xlaprof.report import RenderOptions

    result = result_of(paths, settings)
    name = "json" if as_json or output is not None else "console"
    emit(result, name, output, force, RenderOptions(verbose=verbose))
