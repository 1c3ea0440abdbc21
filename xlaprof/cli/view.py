"""``xlaprof view DIR``: open a run's traces in the XProf profile UI (prints the URL)."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import click

from xlaprof.errors import InputNotFound, InputNotRecognized, PortBusy

log = logging.getLogger(__name__)


def _port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        try:
            sock.bind((host, port))
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
@click.option(
    "--port",
    default=8791,
    show_default=True,
    type=click.IntRange(1, 65535),
    help="TCP port of the UI.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. The default is this machine only; 0.0.0.0 (all interfaces) "
    "lets anyone who can reach the machine read the traces.",
)
def view(path: Path, port: int, host: str) -> None:
    """Serve PATH's traces in the XProf UI until Ctrl-C; prints the URL to open.

    PATH is a run directory (one or many processes), or any logdir with plugins/profile/.
    """
    logdir = logdir_for(path)
    if not _port_free(host, port):
        raise PortBusy(f"port {port} is in use on {host}; pass --port with a free one")
    runs = sorted({p.parent.parent.parent for p in logdir.rglob("plugins/profile/*/*.xplane.pb")})
    click.echo(f"xlaprof: serving {len(runs)} traced run(s) from {logdir} on {host}", err=True)
    click.echo(f"http://{_url_host(host)}:{port}/", err=False)
    _serve(logdir, host, port)


def _url_host(host: str) -> str:
    if host in ("127.0.0.1", "::1", "localhost"):
        return "localhost"
    if host in ("0.0.0.0", "::", ""):
        return socket.gethostname()
    return f"[{host}]" if ":" in host else host


def _serve(logdir: Path, host: str, port: int) -> None:
    """XProf's own server (``xprof.server._launch_server``), bound to ``host`` only.

    ``xprof.server.start_server`` listens on every interface and also opens a gRPC worker port
    on 0.0.0.0 for distributed conversion. Serving one logdir needs no workers: without the
    stubs and the gRPC server the plugin converts in this process (every tool answers), so no
    port but the UI's is opened.
    """
    from xprof import server

    context = server.TBContext(
        str(logdir), server.DataProvider(str(logdir)), server.TBContext.Flags(False)
    )
    context.hide_capture_profile_button = False
    context.enable_tab_name_label = False
    context.src_prefix = None
    plugin = server.ProfilePluginLoader().load(context)
    server.run_server(plugin, host, port)
