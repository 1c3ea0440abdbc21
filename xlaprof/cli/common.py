"""What the subcommands share: input size limits, notes about traces, and writing a result.

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
from typing import TYPE_CHECKING

import click

from xlaprof.errors import OutputError
from xlaprof.escape import terminal
from xlaprof.inputs.paths import DEFAULT_MAX_INPUT_BYTES
from xlaprof.parse.units import parse_size
from xlaprof.safeio import MAX_SIZE_ENV

if TYPE_CHECKING:
    from xlaprof.model.trace import Trace
    from xlaprof.report import RenderOptions, Result


def size_option(_ctx: click.Context, _param: click.Parameter, value: str | None) -> int:
    """``--max-size`` (``512MB``, ``2GB``) as bytes; the default limit when not given."""
    if value is None:
        return DEFAULT_MAX_INPUT_BYTES
    try:
        size = parse_size(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    os.environ[MAX_SIZE_ENV] = str(size)  # capture readers and their worker processes
    return size


def trace_notes(trace: Trace | None, name: str) -> None:
    """Say on stderr which session was read and which capture files were skipped (and why)."""
    if trace is None:
        return
    if len(trace.sessions) > 1:
        listed = ", ".join(s or "." for s in trace.sessions)
        note = (
            f"{len(trace.sessions)} sessions in {name} ({listed}); analyzing "
            f"{trace.session or '.'} (--session NAME for another)"
        )
        say(note)
    for warning in trace.warnings:
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

    options = options or RenderOptions()
    renderer = renderer_for(result, name, output)
    if output is None:
        renderer.write(result, sys.stdout, options)
        return
    import io

    buffer = io.StringIO()
    renderer.write(result, buffer, options)
    write_atomic(output, buffer.getvalue(), force or _owned(output, owned))


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
