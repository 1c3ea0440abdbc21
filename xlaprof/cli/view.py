"""``xlaprof view DIR``: open a run's traces in the XProf profile UI (prints the URL)."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import click

from xlaprof.errors import (
    InputNotFound,
    InputNotRecognized,
    InputTooLarge,
    InputUnreadable,
    PortBusy,
    UnsafeInput,
)

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


def logdir_for(path: Path, scratch: Path | None = None) -> Path:
    """The folder to serve: XProf's UI reads ``<run>/plugins/profile/<session>/*.xplane.pb``.

    A run directory or logdir in that layout is served as it is. A single ``.xplane.pb``, or a
    folder holding xplanes in any other layout, is linked into a temporary logdir under
    ``scratch`` (one run named after ``path``, one session per folder of captures).
    """
    from xlaprof.inputs.captures import find_sessions

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

    PATH is a run directory (one or many processes), a logdir with plugins/profile/, a single
    .xplane.pb, or any folder of xplanes (linked into a temporary logdir for the UI).
    """
    logdir = logdir_for(path)
    _refuse_escaping_names(logdir, path)
    if not _port_free(host, port):
        raise PortBusy(f"port {port} is in use on {host}; pass --port with a free one")
    runs = sorted({p.parent.parent.parent for p in logdir.rglob("plugins/profile/*/*.xplane.pb")})
    shown = path if logdir != path.resolve() else logdir
    click.echo(f"xlaprof: serving {len(runs)} traced run(s) from {shown} on {host}", err=True)
    click.echo(f"http://{_url_host(host)}:{port}/", err=False)
    try:
        _serve(logdir, host, port)
    finally:
        if logdir != path.resolve():  # the temporary logdir of links (and XProf's caches)
            import shutil

            shutil.rmtree(logdir, ignore_errors=True)


def _refuse_escaping_names(logdir: Path, path: Path) -> None:
    """Refuse captures whose HLO module names XProf would turn into paths outside the logdir
    (``xlaprof/parse/xplane/module_names.py``): the UI's first load would write files there."""
    from xlaprof.parse.xplane.module_names import escaping_names
    from xlaprof.safeio import TooLarge, UnsafeFile

    files = sorted(logdir.rglob("plugins/profile/*/*.xplane.pb"))
    try:
        found = escaping_names(files)
    except TooLarge as error:
        raise InputTooLarge(f"{error}; pass --max-size to view it anyway") from None
    except (OSError, UnsafeFile) as error:
        raise InputUnreadable(f"{error}") from None
    if found:
        if logdir != path.resolve():
            import shutil

            shutil.rmtree(logdir, ignore_errors=True)
        capture, names = next(iter(found.items()))
        raise UnsafeInput(
            f"{capture}: HLO module name {names[0]!r} is not a file name; XProf would write "
            f"outside the logdir when the UI loads it, so it is not served "
            f"({sum(map(len, found.values()))} such name(s) in {len(found)} capture(s))"
        )


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
