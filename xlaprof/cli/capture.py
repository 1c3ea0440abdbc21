"""``xlaprof capture --service HOST:PORT[,...] --duration 5s --out DIR``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from xlaprof.cli.common import size_option

if TYPE_CHECKING:
    from xlaprof.capture.remote import Service


def _services(_ctx: click.Context, _param: click.Parameter, value: str) -> list[Service]:
    from xlaprof.capture.remote import parse_services

    try:
        return parse_services(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


def _duration(_ctx: click.Context, _param: click.Parameter, value: str) -> float:
    from xlaprof.capture.remote import parse_duration

    try:
        return parse_duration(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


@click.command()
@click.option(
    "--service",
    "services",
    required=True,
    callback=_services,
    metavar="HOST:PORT[,HOST:PORT...]",
    help="Profiler servers to capture (concurrently, one trace file per host).",
)
@click.option(
    "--duration", default="5s", show_default=True, callback=_duration, help="5s, 500ms, 2m."
)
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Logdir to write into (plugins/profile/<time>/<host>_<port>.xplane.pb).",
)
@click.option(
    "--retries",
    default=0,
    show_default=True,
    type=click.IntRange(0, 20),
    help="Capture again this many times if a host's trace comes back empty.",
)
@click.option(
    "--host-tracer-level",
    default=2,
    show_default=True,
    type=click.IntRange(1, 3),
    help="Host (CPU) events to record: 1 user annotations only, 2 also high-level runtime "
    "events, 3 everything (verbose, larger traces).",
)
@click.option(
    "--device-tracer-level",
    default=1,
    show_default=True,
    type=click.IntRange(0, 1),
    help="Device (TPU/GPU) events: 1 on, 0 off.",
)
@click.option(
    "--max-size",
    callback=size_option,
    metavar="SIZE",
    help="Largest answer to accept from one host (default 2GB), e.g. 512MB.",
)
def capture(
    services: list[Service],
    duration: float,
    out: Path,
    retries: int,
    host_tracer_level: int,
    device_tracer_level: int,
    max_size: int | None,
) -> None:
    """Capture a trace from a running job's profiler server(s).

    The job must serve traces: xp.start_server(PORT), xlaprof.profile(server_port=PORT) or
    `xlaprof run --server-port PORT`. Needs no torch_xla on this machine. When some hosts are
    captured and others not (nothing listening, an empty trace), the good hosts' traces are
    kept, the others named in one line, and the exit code is 27.
    """
    import os

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from xlaprof.capture.remote import capture as run_capture

    # A private copy of the terminal's stderr: the capture silences fds 1 and 2 while the C++
    # client runs, and the progress bar must still show.
    console = Console(file=os.fdopen(os.dup(2), "w"))
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("connecting", total=1.0)

        def progress(message: str, fraction: float) -> None:
            bar.update(task, description=message, completed=fraction)

        result = run_capture(
            services,
            out,
            duration,
            retries=retries,
            host_tracer_level=host_tracer_level,
            device_tracer_level=device_tracer_level,
            progress=progress,
            max_bytes=max_size,
        )
    for path in result.files:
        click.echo(str(path))
    if result.missing:
        # the good hosts' traces are kept (listed above); one line names the others
        from xlaprof.errors import CapturePartial

        left_out = "; ".join(f"{service}: {reason}" for service, reason in result.missing)
        raise CapturePartial(
            f"captured {len(result.files)} of {len(services)} hosts into {out}; "
            f"left out: {left_out}"
        )
    console.print(
        f"xlaprof: captured {len(result.files)} host trace(s) into {out}; "
        f"load with xlaprof.load_trace('{out}') or view with: xlaprof view {out}"
    )
