"""``xlaprof report PATH [-o report.html]``: one self-contained HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from xlaprof.cli.common import analysis_options


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("xlaprof-report.html"),
    show_default=True,
    help="Where to write the report.",
)
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@analysis_options
def report(path: Path, output: Path, force: bool, **settings: Any) -> None:
    """Write a self-contained HTML report of PATH (a run directory, a log, a capture file or a
    folder of captures, or a document saved with `xlaprof analyze --json`).

    It works offline (plotly is embedded): findings with evidence and fixes, the step timeline,
    compilations over steps, top host regions and device ops, and metric deltas per step.
    """
    from xlaprof.cli.common import emit, result_of, said

    result = result_of((path,), settings)
    one = result.one()
    if len(one.notes) > len(result.notes):
        said(type(result)([], notes=one.notes[len(result.notes) :]))
    emit(one, "html", output, force)
    click.echo(str(output))
