"""``xlaprof analyze PATH...``: diagnose metrics reports, PT_XLA_DEBUG logs and run directories."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from xlaprof.errors import OutputError
from xlaprof.load import DEFAULT_MAX_INPUT_BYTES
from xlaprof.parse.units import parse_size

if TYPE_CHECKING:
    from xlaprof.analysis.trace import Trace


def _size(_ctx: click.Context, _param: click.Parameter, value: str | None) -> int:
    if value is None:
        return DEFAULT_MAX_INPUT_BYTES
    try:
        size = parse_size(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    import os

    from xlaprof.safeio import MAX_SIZE_ENV

    os.environ[MAX_SIZE_ENV] = str(size)  # capture readers and their worker processes
    return size


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
    callback=_size,
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
    from xlaprof.api import analyze_parts
    from xlaprof.load import load_parts
    from xlaprof.report import json_out

    if scheduler:
        from xlaprof.dask_client import address

        scheduler = address(scheduler)  # a bad address is one line and exit 25, at once
    parts = load_parts(
        list(paths), max_size, warmup_steps, session, scheduler=scheduler, workers=workers
    )
    results = analyze_parts(parts, source_root)
    for result in results:
        trace_notes(result.trace, result.part.name)
    if as_json or output is not None:
        text = json_out.render(results)
        if output is None:
            sys.stdout.write(text + "\n")
        else:
            write_atomic(output, text + "\n", force)
        return
    from xlaprof.report import console

    console.render(results, verbose=verbose)


def trace_notes(trace: Trace | None, name: str) -> None:
    """Say on stderr which session was read and which capture files were skipped (and why)."""
    if trace is None:
        return
    from xlaprof.escape import terminal

    if len(trace.sessions) > 1:
        listed = ", ".join(s or "." for s in trace.sessions)
        click.echo(
            terminal(
                f"xlaprof: {len(trace.sessions)} sessions in {name} ({listed}); analyzing "
                f"{trace.session or '.'} (--session NAME for another)"
            ),
            err=True,
        )
    for warning in trace.warnings:
        click.echo(f"xlaprof: warning: {terminal(warning)}", err=True)


def write_atomic(path: Path, text: str, force: bool) -> None:
    """Write ``text`` to ``path`` via a temporary file and rename: never half-written."""
    from xlaprof.rundir.writer import atomic_write_text

    if path.exists() and not force:
        raise OutputError(f"{path}: exists; pass --force to overwrite it")
    try:
        atomic_write_text(path, text)
    except OSError as error:
        raise OutputError(f"{path}: cannot be written ({error.strerror})") from None
