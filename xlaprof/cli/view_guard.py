"""What ``xlaprof view`` lets XProf's server do: serve, read-only, the copy it was given.

XProf's server is made for a logdir its user trusts, reached by its user. ``xlaprof view``
serves folders someone sent, on a port any web page open in the browser can send requests
to. So the server it starts is wrapped:

- **A private logdir of copies** (``private_logdir``): each capture is copied, read as a
  regular file that is no link (``safeio.open_regular``), into a fresh folder only this user
  can enter. XProf writes its caches (``.cached_tools.json``, converted tool data) beside the
  captures it serves: there, never into the sent folder, and never through a link planted in
  it (a ``.cached_tools.json`` linked to a user file was overwritten on opening the UI).
- **Read-only requests to the UI's routes** (``Guard``): GET and HEAD only; the capture route
  (which runs XProf's capture client on any address a request names: ``xlaprof capture`` is
  the guarded way to capture) and the cache-generation route are refused; a ``session_path``
  or ``run_path`` parameter is honoured only inside the private logdir (links resolved).
- **From this UI only**: the ``Host`` header must name the address served (a page on another
  name that resolves to this machine, DNS rebinding, is refused), and a request that says
  where it comes from (``Origin``, ``Sec-Fetch-Site``) must come from the UI's own origin.

Every refusal is a 403 (404 for a route that is not the UI's) with one line of text.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from xlaprof.safeio import DEFAULT_XPLANE_LIMIT, TooLarge, UnsafeFile, open_regular

PREFIX = "/data/plugin/profile"
# The routes the UI reads (xprof.profile_plugin): its files, the run and tool lists, the data.
READ_ROUTES = frozenset(
    {
        "/",
        "/index.js",
        "/index.html",
        "/bundle.js",
        "/styles.css",
        "/materialicons.woff2",
        "/material_symbols_outlined.woff2",
        "/trace_viewer_index.html",
        "/trace_viewer_index.js",
        "/trace_viewer_v2.js",
        "/trace_viewer_v2.wasm",
        "/zone.js",
        "/runtime.js",
        "/data",
        "/data_csv",
        "/version",
        "/runs",
        "/run_tools",
        "/hosts",
        "/module_list",
        "/local",
        "/config",
    }
)
# Routes that act rather than read: capture from an address the request names, write caches.
REFUSED_ROUTES = {
    "/capture_profile": "capturing is not served by `xlaprof view`; use `xlaprof capture`",
    "/generate_cache": "`xlaprof view` serves read-only",
}
PATH_PARAMETERS = ("session_path", "run_path")
_COPY_CHUNK = 1024**2

StartResponse = Callable[..., Any]
App = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def private_logdir(xplanes: dict[Path, list[Path]], limit: int = DEFAULT_XPLANE_LIMIT) -> Path:
    """A fresh folder (mode 0700) holding a copy of each capture at ``relative/plugins/
    profile/<session>/<file>``: ``xplanes`` maps each session's relative folder to its files.

    A capture is read as a regular file that is no link, at most ``limit`` bytes; one that is
    a link, a FIFO or too large raises ``UnsafeFile``/``TooLarge`` (the folder is removed).
    """
    root = Path(tempfile.mkdtemp(prefix="xlaprof-view-"))
    try:
        for session, files in xplanes.items():
            target = root / session
            target.mkdir(parents=True, exist_ok=True, mode=0o700)
            for file in files:
                _copy(file, target / file.name, limit)
    except BaseException:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
        raise
    return root


def _copy(source: Path, target: Path, limit: int) -> None:
    fd = open_regular(source, follow=False)
    with os.fdopen(fd, "rb") as reading:
        size = os.fstat(reading.fileno()).st_size
        if size > limit:
            raise TooLarge(f"{source}: larger than {limit} bytes", size, limit)
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        copied = 0
        with os.fdopen(out, "wb") as writing:
            while chunk := reading.read(_COPY_CHUNK):
                copied += len(chunk)
                if copied > limit:
                    raise TooLarge(f"{source}: larger than {limit} bytes", copied, limit)
                writing.write(chunk)


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The ``Host`` header values a request to the UI may carry: the address served (and the
    loopback names, where it is a loopback or every address), with the port."""
    names = {host}
    if host in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "::", ""):
        names |= {"localhost", "127.0.0.1", "::1"}
    if host in ("0.0.0.0", "::", ""):
        import socket

        names |= {socket.gethostname(), socket.getfqdn()}
    return frozenset(f"[{n}]:{port}" if ":" in n else f"{n}:{port}" for n in names if n)


class Guard:
    """WSGI middleware in front of XProf's app (see the module docstring)."""

    def __init__(self, app: App, logdir: Path, hosts: frozenset[str]) -> None:
        self.app = app
        self.logdir = logdir.resolve()
        self.hosts = frozenset(h.lower() for h in hosts)
        self.origins = frozenset(f"http://{h}" for h in self.hosts)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        refusal = self.refusal(environ)
        if refusal is not None:
            status, message = refusal
            body = (message + "\n").encode()
            start_response(
                status,
                [
                    ("Content-Type", "text/plain; charset=utf-8"),
                    ("Content-Length", str(len(body))),
                    ("X-Content-Type-Options", "nosniff"),
                ],
            )
            return [body]
        return self.app(environ, start_response)

    def refusal(self, environ: dict[str, Any]) -> tuple[str, str] | None:
        """Why the request is refused (status and one line), or None to serve it."""
        return self._from_elsewhere(environ) or self._not_a_read(environ)

    def _from_elsewhere(self, environ: dict[str, Any]) -> tuple[str, str] | None:
        """A request not from this UI's own page: another Host (DNS rebinding), Origin or site."""
        host = str(environ.get("HTTP_HOST", "")).lower()
        if host not in self.hosts:
            return "403 Forbidden", "refused: the Host header does not name this UI"
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None and str(origin).lower() not in self.origins:
            return "403 Forbidden", "refused: a request from another origin"
        site = environ.get("HTTP_SEC_FETCH_SITE")
        if site is not None and site not in ("same-origin", "none"):
            return "403 Forbidden", "refused: a request from another site"
        return None

    def _not_a_read(self, environ: dict[str, Any]) -> tuple[str, str] | None:
        """A request that is not a read of the UI's routes inside the folder served."""
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return "405 Method Not Allowed", "refused: `xlaprof view` serves read-only"
        path = str(environ.get("PATH_INFO", ""))
        route = path[len(PREFIX) :] if path == PREFIX or path.startswith(PREFIX + "/") else path
        if route != "/" and route.endswith("/"):
            route = route[:-1]
        route = route or "/"
        if route in REFUSED_ROUTES:
            return "403 Forbidden", f"refused: {REFUSED_ROUTES[route]}"
        frontend = path.startswith(PREFIX + "/") and "." not in route.rsplit("/", 1)[-1]
        if route not in READ_ROUTES and not frontend:
            return "404 Not Found", "not found"
        query = parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
        outside = [
            name for name in PATH_PARAMETERS for v in query.get(name, []) if not self._inside(v)
        ]
        if outside:
            return "403 Forbidden", f"refused: {outside[0]} outside the folder served"
        return None

    def _inside(self, value: str) -> bool:
        if "\x00" in value or urlsplit(value).scheme not in ("", "file"):
            return False
        try:
            resolved = Path(urlsplit(value).path if value.startswith("file:") else value)
            resolved = (self.logdir / resolved).resolve()
        except (OSError, ValueError, RuntimeError):
            return False
        if resolved != self.logdir and self.logdir not in resolved.parents:
            return False
        try:
            return stat.S_ISDIR(os.stat(resolved).st_mode)
        except OSError:
            return False


__all__ = ["Guard", "UnsafeFile", "allowed_hosts", "private_logdir"]
