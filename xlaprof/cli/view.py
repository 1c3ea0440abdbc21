"""``xlaprof view DIR``: open a run's traces in the XProf profile UI (prints the URL)."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import click

from xlaprof.errors import InputNotFound, InputNotRecognized, PortBusy

log = logging.getLogger(__name__)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError as error:
            log.debug("port %s not free: %s", port, error)
            return False
    return True


def logdir_for(path: Path) -> Path:
    """The folder to serve: ``path`` itself, which XProf searches for plugins/profile/."""
    if not path.exists():
        raise InputNotFound(f"{path}: no such run directory or logdir")
    if not path.is_dir():
        raise InputNotRecognized(f"{path}: give the run directory or logdir, not a file")
    if not any(path.rglob("*.xplane.pb")):
        raise InputNotRecognized(
            f"{path}: no trace to view (no *.xplane.pb below it); record one with "
            "`xlaprof run --trace-steps A:B` or `xlaprof capture`"
        )
    return path.resolve()


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--port", default=8791, show_default=True, type=click.IntRange(1, 65535))
def view(path: Path, port: int) -> None:
    """Serve PATH's traces in the XProf UI until Ctrl-C; prints the URL to open.

    PATH is a run directory (one or many processes), or any logdir with plugins/profile/.
    """
    logdir = logdir_for(path)
    if not _port_free(port):
        raise PortBusy(f"port {port} is in use; pass --port with a free one")
    from xprof import server

    runs = sorted({p.parent.parent.parent for p in logdir.rglob("plugins/profile/*/*.xplane.pb")})
    click.echo(f"xlaprof: serving {len(runs)} traced run(s) from {logdir}", err=True)
    click.echo(f"http://localhost:{port}/", err=False)
    server.start_server(logdir=str(logdir), port=port, grpc_port=_free_port())
