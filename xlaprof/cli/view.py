"""``xlaprof view DIR``: open a run's traces in the XProf profile UI (prints the URL)."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any

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


def logdir_for(path: Path) -> Path:
    """The folder to serve: a private copy of ``path``'s captures (``view_guard``).

    XProf's UI reads ``<run>/plugins/profile/<session>/*.xplane.pb``. A run directory or
    logdir in that layout keeps its layout in the copy; a single ``.xplane.pb``, or a folder
    holding xplanes in any other layout, becomes one run named after ``path``, one session
    per folder of captures. Only files that really lie inside ``path`` are copied: a capture
    that is a link, or reached through a linked folder, is refused (exit 24).
    """
    from xlaprof.cli.view_guard import private_logdir
    from xlaprof.inputs.captures import find_sessions
    from xlaprof.safeio import TooLarge, UnsafeFile

    if not path.exists():
        raise InputNotFound(f"{path}: no such run directory, logdir or capture file")
    path = path.resolve()  # the path given may be a link; what it holds is checked below
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
    _refuse_links(path, xplanes)
    copies = _session_copies(path, xplanes)
    try:
        return private_logdir(copies)
    except TooLarge as error:
        raise InputTooLarge(f"{error}") from None
    except UnsafeFile as error:
        raise UnsafeInput(f"{error}; `xlaprof view` serves only regular files") from None
    except OSError as error:
        reason = error.strerror or error
        raise InputUnreadable(f"{path}: not copied for the UI ({reason})") from None


def _refuse_links(path: Path, xplanes: dict[str, list[Path]]) -> None:
    """``UnsafeInput`` for a capture that is a link or lies outside ``path`` (a linked folder)."""
    real_root = Path(os.path.realpath(path if path.is_dir() else path.parent))
    for files in xplanes.values():
        for file in files:
            real = Path(os.path.realpath(file))
            if os.path.islink(file) or not real.is_relative_to(real_root):
                raise UnsafeInput(f"{file}: a link; `xlaprof view` serves only the files given")


def _session_copies(path: Path, xplanes: dict[str, list[Path]]) -> dict[Path, list[Path]]:
    """Where in the private logdir each capture goes: its own ``plugins/profile/<session>``
    where ``path`` is in XProf's layout, else one run named after ``path``."""
    in_layout = path.is_dir() and all(
        f.parent.parent.name == "profile" and f.parent.parent.parent.name == "plugins"
        for files in xplanes.values()
        for f in files
    )
    copies: dict[Path, list[Path]] = {}
    run = path.name.split(".xplane.pb")[0] or "capture"
    for name, files in xplanes.items():
        for file in files:
            if in_layout:
                session = file.parent.relative_to(path)
            else:
                session = Path(run, "plugins", "profile", name.replace("/", "_") or "capture")
            copies.setdefault(session, []).append(file)
    return copies


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
    .xplane.pb, or any folder of xplanes. The UI serves a private copy of its captures,
    read-only, to its own page only (docs/security.md).
    """
    logdir = logdir_for(path)
    try:
        _refuse_escaping_names(logdir, path)
        if not _port_free(host, port):
            raise PortBusy(f"port {port} is in use on {host}; pass --port with a free one")
        runs = sorted(
            {p.parent.parent.parent for p in logdir.rglob("plugins/profile/*/*.xplane.pb")}
        )
        click.echo(f"xlaprof: serving {len(runs)} traced run(s) from {path} on {host}", err=True)
        click.echo(f"http://{_url_host(host)}:{port}/", err=False)
        _serve(logdir, host, port)
    finally:  # the private copy (and XProf's caches in it)
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
        capture, names = next(iter(found.items()))
        # named as given, not as the private copy the UI would have served
        shown = str(capture).replace(str(logdir), str(path), 1)
        raise UnsafeInput(
            f"{shown}: HLO module name {names[0]!r} is not a file name; XProf would write "
            f"outside the logdir when the UI loads it, so it is not served "
            f"({sum(map(len, found.values()))} such name(s) in {len(found)} capture(s))"
        )


def _url_host(host: str) -> str:
    if host in ("127.0.0.1", "::1", "localhost"):
        return "localhost"
    if host in ("0.0.0.0", "::", ""):
        return socket.gethostname()
    return f"[{host}]" if ":" in host else host


def guarded_app(logdir: Path, host: str, port: int) -> Any:
    """XProf's UI over ``logdir`` as a WSGI app, behind ``view_guard.Guard``.

    ``xprof.server.start_server`` listens on every interface and also opens a gRPC worker port
    on 0.0.0.0 for distributed conversion. Serving one logdir needs no workers: without the
    stubs and the gRPC server the plugin converts in this process (every tool answers), so no
    port but the UI's is opened.
    """
    from xprof import server

    from xlaprof.cli.view_guard import Guard, allowed_hosts

    context = server.TBContext(
        str(logdir), server.DataProvider(str(logdir)), server.TBContext.Flags(False)
    )
    context.hide_capture_profile_button = True  # the route is refused (view_guard)
    context.enable_tab_name_label = False
    context.src_prefix = None
    plugin = server.ProfilePluginLoader().load(context)
    return Guard(server.make_wsgi_app(plugin), logdir, allowed_hosts(host, port))


def _serve(logdir: Path, host: str, port: int) -> None:
    """Serve ``guarded_app`` on ``host:port`` (XProf's own WSGI server) until Ctrl-C."""
    from xprof import server

    wsgi_server = server.wsgi.Server((host, port), guarded_app(logdir, host, port))
    try:
        wsgi_server.start()
    except KeyboardInterrupt:
        wsgi_server.stop()
