"""``xlaprof report PATH [-o report.html]``: one self-contained HTML report."""

from __future__ import annotations

from pathlib import Path

import click


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
@click.option("--process", help="For a run of several processes: which one (folder name).")
@click.option(
    "--session",
    metavar="NAME",
    help="For a logdir with several profiling sessions: which one (default: the latest).",
)
@click.option(
    "--source-root",
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder whose source files the report may quote (default: the run's recorded working "
    "directory, if it exists here). Files outside it are never read.",
)
def report(
    path: Path,
    output: Path,
    force: bool,
    process: str | None,
    session: str | None,
    source_root: Path | None,
) -> None:
    """Write a self-contained HTML report of PATH (a run directory, a log, a capture file or a
    folder of captures).

    It works offline (plotly is embedded): findings with evidence and fixes, the step timeline,
    compilations over steps, top host regions and device ops, and metric deltas per step.
    """
    from xlaprof.cli.common import emit, say, trace_notes
    from xlaprof.model.result import AnalysisResult
    from xlaprof.pipeline import analyze_one

    result, _, note = analyze_one(path, process, session=session, source_root=source_root)
    if note:
        say(note)
    trace_notes(result.trace, path.name)
    emit(AnalysisResult([result]), "html", output, force)
    click.echo(str(output))
