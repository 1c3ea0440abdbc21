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


def logdir_for(path: Path, scratch: Path | None = None) -> Path:
    """The folder to serve: XProf's UI reads ``<run>/plugins/profile/<session>/*.xplane.pb``.

    A run directory or logdir in that layout is served as it is. A single ``.xplane.pb``, or a
    folder holding xplanes in any other layout, is linked into a temporary logdir under
    ``scratch`` (one run named after ``path``, one session per folder of captures).
    """
    from xlaprof.analysis.trace import find_sessions

    if not path.exists():
        raise InputNotFound(f"{path}: no such run directory, logdir or capture file")
    hint = "record one with `xlaprof run --trace-steps A:B` or `xlaprof capture`"
    try:
        sessions = find_sessions(path)
    except InputNotRecognized:
        raise InputNotRecognized(f"{path}: no trace to view (no *.xplane.pb); {hint}") from None
    xplanes = {
        name: [f for f in files if f.name.endswith(".xplane.pb")]
        for name, files in sessions.items()
    }
    xplanes = {name: files for name, files in xplanes.items() if files}
    if not xplanes:
        raise InputNotRecognized(
            f"{path}: only Chrome traces here; XProf's UI reads *.xplane.pb (open a "
            "*.trace.json.gz in https://ui.perfetto.dev instead)"
        )
    if path.is_dir() and all(
        f.parent.parent.name == "profile" and f.parent.parent.parent.name == "plugins"
        for files in xplanes.values()
        for f in files
    ):
        return path.resolve()
    if scratch is None:
        import tempfile

        scratch = Path(tempfile.mkdtemp(prefix="xlaprof-view-"))
    run = path.name.split(".xplane.pb")[0] or "capture"
    for name, files in xplanes.items():
        session = scratch / run / "plugins" / "profile" / (name.replace("/", "_") or "capture")
        session.mkdir(parents=True, exist_ok=True)
        for file in files:
            (session / file.name).symlink_to(file.resolve())
    return scratch


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--port", default=8791, show_default=True, type=click.IntRange(1, 65535))
def view(path: Path, port: int) -> None:
    """Serve PATH's traces in the XProf UI until Ctrl-C; prints the URL to open.

    PATH is a run directory (one or many processes), a logdir with plugins/profile/, a single
    .xplane.pb, or any folder of xplanes (linked into a temporary logdir for the UI).
    """
    logdir = logdir_for(path)
    if not _port_free(port):
        raise PortBusy(f"port {port} is in use; pass --port with a free one")
    from xprof import server

    runs = sorted({p.parent.parent.parent for p in logdir.rglob("plugins/profile/*/*.xplane.pb")})
    shown = path if logdir != path.resolve() else logdir
    click.echo(f"xlaprof: serving {len(runs)} traced run(s) from {shown}", err=True)
    click.echo(f"http://localhost:{port}/", err=False)
    try:
        server.start_server(logdir=str(logdir), port=port, grpc_port=_free_port())
    finally:
        if logdir != path.resolve():  # the temporary logdir of links (and XProf's caches)
            import shutil

            shutil.rmtree(logdir, ignore_errors=True)
