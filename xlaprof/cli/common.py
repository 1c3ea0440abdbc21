"""What the subcommands share: options -> request -> result -> renderer -> output.

``analysis_options`` adds the options every command that reads an analysis takes (which
process and session, warm-up, source root, size cap, where a pod is read); ``request_from``
turns them into the one ``AnalysisRequest``; ``analyzed`` runs the pipeline on it and says on
stderr what was chosen (which run or process, which session, which capture files were skipped).

``emit`` is the one way a command outputs a result: the renderer is picked by name (``--json``)
or by the output file's extension (``xlaprof.report.renderer_for``), written to stdout or, with
a path, to a file written atomically. A file that exists is kept unless ``--force`` is given,
except a file the command itself wrote before (``owned``: e.g. ``check --junit`` in a CI job
that runs again), which is rewritten.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from xlaprof.errors import OutputError
from xlaprof.escape import terminal
from xlaprof.model.request import DEFAULT_MAX_INPUT_BYTES
from xlaprof.parse.units import parse_size

if TYPE_CHECKING:
    from xlaprof.model.request import AnalysisRequest
    from xlaprof.model.result import AnalysisResult, PartInfo
    from xlaprof.report import RenderOptions, Result

Command = TypeVar("Command", bound=Callable[..., Any])

# The settings ``analysis_options`` adds, by parameter name (``request_from`` reads them).
ANALYSIS_SETTINGS = (
    "process",
    "session",
    "warmup_steps",
    "source_root",
    "max_size",
    "scheduler",
    "workers",
)


def _options() -> dict[str, Callable[[Any], Any]]:
    """Each shared option by its parameter name, in the order ``--help`` lists them."""
    options = (
        click.option(
            "--process",
            metavar="NAME",
            help="For a folder of several process runs: which one (folder name); '*' for "
            "all of every run. Default: the latest run's (by its recorded start time).",
        ),
        click.option(
            "--session",
            metavar="NAME",
            help="For a logdir with several profiling sessions: which one (default: the latest).",
        ),
        click.option(
            "--warmup-steps",
            default=2,
            show_default=True,
            type=click.IntRange(min=0),
            help="How many steps are warm-up: the first N the input holds, whatever their numbers "
            "(of a capture numbered from elsewhere that measured its compiles, its leading "
            "steps that compiled, at most N).",
        ),
        click.option(
            "--source-root",
            type=click.Path(path_type=Path, file_okay=False),
            help="Folder whose source files findings may quote (default: the run's recorded "
            "working directory, if it exists here). A run recorded elsewhere has the files it "
            "names under its recorded folder read at the same place under this one. Files "
            "outside it are never read.",
        ),
        click.option(
            "--max-size",
            callback=size_option,
            metavar="SIZE",
            help="Largest input file to read (default 256MB), e.g. 2GB.",
        ),
        click.option(
            "--scheduler",
            metavar="ADDRESS",
            help="Trace logdirs of many hosts: read each host on this dask.distributed cluster "
            "(tcp://host:8786; needs xlaprof[pod]) instead of local worker processes. Workers' "
            "answers are read as plain data, but dask's own protocol trusts the scheduler: "
            "name only a cluster you trust. "
            "$XLAPROF_DASK_SCHEDULER does the same, announced on stderr.",
        ),
        click.option(
            "--workers",
            type=click.IntRange(min=1),
            help="Trace logdirs of many hosts: local worker processes (default: one per core).",
        ),
    )
    return dict(zip(ANALYSIS_SETTINGS, options, strict=True))


def analysis_options(command: Command) -> Command:
    """The options of every command that analyzes: ``--process``, ``--session``,
    ``--warmup-steps``, ``--source-root``, ``--max-size``, ``--scheduler``, ``--workers``."""
    return with_options(*ANALYSIS_SETTINGS)(command)


def with_options(*names: str) -> Callable[[Command], Command]:
    """Some of the shared options (``xlaprof check`` has a warm-up of its own)."""
    chosen = [option for name, option in _options().items() if name in names]

    def add(command: Command) -> Command:
        for option in reversed(chosen):
            command = option(command)
        return command

    return add


def request_from(paths: tuple[Path, ...] | list[Path], settings: dict[str, Any]) -> AnalysisRequest:
    """The request ``analysis_options``' values make for ``paths`` (a bad ``--scheduler``
    address is one line and its exit code, at once)."""
    from xlaprof.model.request import AnalysisRequest, PodSettings

    scheduler = settings.get("scheduler")
    if scheduler:
        from xlaprof.inputs.pod.cluster import address

        scheduler = address(scheduler)
    max_size = settings.get("max_size")
    return AnalysisRequest(
        tuple(paths),
        process=settings.get("process"),
        session=settings.get("session"),
        warmup_steps=settings.get("warmup_steps", 2),
        source_root=settings.get("source_root"),
        max_size=DEFAULT_MAX_INPUT_BYTES if max_size is None else max_size,
        max_size_given=max_size is not None,
        scheduler=scheduler,
        workers=settings.get("workers"),
        pod=PodSettings.of(os.environ),  # the one read of the environment's pod settings
    )


def analyzed(request: AnalysisRequest) -> AnalysisResult:
    """``request`` analyzed, with what was chosen said on stderr (runs, sessions, files)."""
    from xlaprof.cli.process_memory import frozen_start, keep_freed_memory, small_pages
    from xlaprof.pipeline import analyze

    small_pages()
    frozen_start()
    keep_freed_memory(request.inputs)
    result = analyze(request)
    said(result)
    return result


def said(result: AnalysisResult) -> None:
    """Say on stderr the notes of ``result``: which run and process, session, skipped files."""
    for note in result.notes:
        say(note)
    for part in result.parts:
        trace_notes(part.part)


def size_option(_ctx: click.Context, _param: click.Parameter, value: str | None) -> int | None:
    """``--max-size`` (``512MB``, ``2GB``) as bytes; None when not given (each reader's own)."""
    if value is None:
        return None
    try:
        size = parse_size(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    return size  # into the request (``request_from``), which takes it to every reader


def trace_notes(part: PartInfo) -> None:
    """Say on stderr which session of ``part``'s trace was read and which capture files were
    skipped (and why)."""
    if len(part.sessions) > 1:
        listed = ", ".join(s or "." for s in part.sessions)
        note = (
            f"{len(part.sessions)} sessions in {part.name} ({listed}); analyzing "
            f"{part.session or '.'} (--session NAME for another)"
        )
        say(note)
    for warning in part.trace_warnings:
        say(f"warning: {warning}")


def say(text: str) -> None:
    """One line on stderr, ``xlaprof: ``-prefixed; data in it shown with controls visible."""
    click.echo(f"xlaprof: {terminal(text)}", err=True)


def emit(
    result: Result,
    name: str | None = None,
    output: Path | None = None,
    force: bool = False,
    options: RenderOptions | None = None,
    owned: Callable[[str], bool] | None = None,
) -> None:
    """Render ``result`` (by ``name``, else by ``output``'s extension) to stdout or ``output``."""
    from xlaprof.report import RenderOptions, renderer_for

    options = with_environment(options or RenderOptions())
    renderer = renderer_for(result, name, output)
    if output is None:
        renderer.write(result, sys.stdout, options)
        return
    import io

    buffer = io.StringIO()
    renderer.write(result, buffer, options)
    write_atomic(output, buffer.getvalue(), force or _owned(output, owned))


def with_environment(options: RenderOptions) -> RenderOptions:
    """``options`` with what the CLI's environment says of the output (the renderers read no
    environment variable): ``COLUMNS``, the width of a file or pipe; ``GITHUB_WORKSPACE``, the
    folder GitHub annotations name files relative to; ``XLAPROF_SELF_CHECK``, whether the
    ``--json`` document is checked against its schema before it is written."""
    import dataclasses
    import os

    from xlaprof.model.document_id import SELF_CHECK_ENV

    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else None
    return dataclasses.replace(
        options,
        file_width=options.file_width or width,
        workspace=options.workspace or os.environ.get("GITHUB_WORKSPACE"),
        self_check=options.self_check or bool(os.environ.get(SELF_CHECK_ENV)),
    )


def _owned(path: Path, owned: Callable[[str], bool] | None) -> bool:
    """Whether ``path`` holds what this command wrote there before (its first 4 KB say so)."""
    if owned is None or not path.is_file():
        return False
    try:
        with path.open("rb") as handle:
            head = handle.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return False
    return owned(head)


def write_atomic(path: Path, text: str, force: bool) -> None:
    """Write ``text`` to ``path`` via a temporary file and rename: never half-written."""
    from xlaprof.rundir.writer import atomic_write_text

    if path.exists() and not force:
        raise OutputError(f"{path}: exists; pass --force to overwrite it")
    try:
        atomic_write_text(path, text)
    except OSError as error:
        raise OutputError(f"{path}: cannot be written ({error.strerror})") from None


def result_of(paths: tuple[Path, ...] | list[Path], settings: dict[str, Any]) -> AnalysisResult:
    """The result to show for ``paths`` (a document saved with ``xlaprof analyze --json`` is
    read back as it was, by the pipeline: ``xlaprof.inputs.saved``)."""
    return analyzed(request_from(paths, settings))
