"""``xlaprof analyze PATH...``: diagnose metrics reports, PT_XLA_DEBUG logs and run directories."""

from __future__ import annotations

from pathlib import Path

import click

from xlaprof.cli.common import emit, size_option, trace_notes


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
@click.option(
    "--max-size",
    callback=size_option,
    metavar="SIZE",
    help="Largest input file to read (default 256MB), e.g. 2GB.",
)
@click.option(
    "--warmup-steps",
    default=2,
    show_default=True,
    type=click.IntRange(min=0),
    help="Steps whose compilations count as warm-up (run directories).",
)
@click.option(
    "--source-root",
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder whose source files findings may quote (default: the run's recorded working "
    "directory, if it exists here). Files outside it are never read.",
)
@click.option("-v", "--verbose", is_flag=True, help="List every line that could not be read.")
@click.option(
    "--session",
    metavar="NAME",
    help="For a logdir with several profiling sessions: which one (default: the latest).",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="Trace logdirs of many hosts: read each host on this dask.distributed cluster "
    "(tcp://host:8786; needs xlaprof[pod]) instead of local worker processes. Its workers' "
    "results are unpickled here: name only a cluster you trust. $XLAPROF_DASK_SCHEDULER "
    "does the same, announced on stderr.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="Trace logdirs of many hosts: local worker processes (default: one per core).",
)
def analyze(
    paths: tuple[Path, ...],
    as_json: bool,
    output: Path | None,
    force: bool,
    max_size: int,
    warmup_steps: int,
    source_root: Path | None,
    verbose: bool,
    session: str | None,
    scheduler: str | None,
    workers: int | None,
) -> None:
    """Diagnose PATHs: metrics reports, PT_XLA_DEBUG logs (auto-detected), run directories,
    or profiler captures (.xplane.pb, *trace.json.gz, or a folder of them).

    Files are taken as the output of one job and analyzed together. A run directory written by
    `xlaprof run` or `xlaprof.profile()` gives exact per-step findings. A capture gives each
    device's steps, busy and idle time and top ops.
    """
    from xlaprof.inputs.paths import load_parts
    from xlaprof.model.result import AnalysisResult
    from xlaprof.pipeline import analyze_parts
    from xlaprof.report import RenderOptions

    if scheduler:
        from xlaprof.inputs.pod.cluster import address

        scheduler = address(scheduler)  # a bad address is one line and exit 25, at once
    parts = load_parts(
        list(paths), max_size, warmup_steps, session, scheduler=scheduler, workers=workers
    )
    result = AnalysisResult(analyze_parts(parts, source_root))
    for part in result.parts:
        trace_notes(part.trace, part.part.name)
    name = "json" if as_json or output is not None else "console"
    emit(result, name, output, force, RenderOptions(verbose=verbose))
