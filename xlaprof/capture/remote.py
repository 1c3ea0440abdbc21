"""Remote capture from profiler servers, one host or many, without torch_xla.

A job serves traces once it calls ``xp.start_server(port)`` (``xlaprof.profile(server_port=..)``
and ``xlaprof run --server-port`` do it). The client is xlaprof's own
(``xlaprof.capture.profiler_service``, over gRPC), so this runs on an analysis box with no
torch_xla. Every address is asked concurrently, and one capture comes back as one session
folder with one ``<host>_<port>.xplane.pb`` per host.

A server's answer never names a path: the capture writes only the XSpace of each host, under
the host name the user gave (sanitized), into a session folder it creates itself, each file
created exclusively (``safeio.create_exclusive``). Whatever else a server sends (tool-data
entries named ``x/../../.bashrc``, as XProf's client would save them) is dropped.

One dead host does not cost the others: addresses where nothing listens are set aside before
the capture, hosts whose trace comes back empty are retried with the rest, and when some hosts
were captured and others not, the good hosts' traces are kept and the others named
(``Capture.missing``; the CLI exits with ``CapturePartial``'s code).

A job under xlaprof (``xlaprof run``, ``xlaprof.profile``) puts a ``step_num`` TraceMe over each
step, so a capture numbers its steps as the job does; a bare job's steps (torch_xla's
StepMarker carries no number) are numbered from 0 within the capture.

gRPC's C core may log to the process's stderr; those lines are kept out of the user's
terminal and used to explain a failure in one line.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from xlaprof.capture.profiler_service import ANSWER_GRACE_SECONDS
from xlaprof.errors import CaptureEmpty, CaptureError, NothingListening

CONNECT_TIMEOUT_SECONDS = 2.0
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min)?\s*$")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class Service:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def file_stem(self) -> str:
        """``host_port``, the name of this host's trace file: letters, digits, ``.``, ``_``
        and ``-`` only (anything else, ``/`` and ``:`` included, becomes ``_``), never a
        hidden name."""
        host = _UNSAFE_NAME.sub("_", self.host)
        return f"{'_' if host.startswith('.') else ''}{host}_{self.port}"


def parse_services(text: str) -> list[Service]:
    """``host:port[,host:port...]``; raises ValueError with the bad part named."""
    services = []
    for part in (p.strip() for p in text.split(",")):
        host, sep, port = part.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"not HOST:PORT: {part!r}")
        services.append(Service(host.strip("[]"), int(port)))
    if len({str(s) for s in services}) != len(services):
        raise ValueError("an address is given twice")
    return services


def parse_duration(text: str) -> float:
    """``5s``, ``500ms``, ``2m``, or plain seconds -> seconds."""
    match = _DURATION_RE.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (try 5s, 500ms or 2m)")
    value = float(match.group(1))
    unit = match.group(2) or "s"
    seconds = value / 1000 if unit == "ms" else value * 60 if unit in ("m", "min") else value
    if seconds <= 0:
        raise ValueError("the duration must be positive")
    return seconds


_START_ONE = (
    "Start one in the job with xp.start_server(PORT), xlaprof.profile(server_port=PORT) or "
    "`xlaprof run --server-port PORT`, and check the host and port"
)


def unreachable(service: Service, timeout: float = CONNECT_TIMEOUT_SECONDS) -> str | None:
    """Why nothing accepts connections at ``service`` (a few words), or None if something does."""
    try:
        with socket.create_connection((service.host, service.port), timeout=timeout):
            return None
    except OSError as error:
        return f"no profiler server answers ({error.strerror or type(error).__name__})"


def probe(service: Service, timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
    """Fail fast and clearly when nothing accepts connections at ``service``."""
    reason = unreachable(service, timeout)
    if reason is not None:
        raise NothingListening(f"{service}: {reason}. {_START_ONE}")


@dataclass
class Capture:
    """What a capture kept: one trace file per host captured, and the hosts left out (each
    with why, in a few words)."""

    files: list[Path]
    missing: list[tuple[Service, str]]


@contextlib.contextmanager
def _quiet_client() -> Iterator[Path]:
    """Send file descriptors 1 and 2 to a temporary file: the C++ client prints and logs there.

    Progress written through a duplicate of the original stderr (see the CLI) still shows.
    """
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.NamedTemporaryFile(prefix="xlaprof-capture-", suffix=".log") as log:
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            yield Path(log.name)
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def _count_events(path: Path) -> int:
    from xlaprof.parse.xplane.schema import read_xspace

    space = read_xspace(path)
    return sum(len(line.events) for plane in space.planes for line in plane.lines)


def capture(
    services: list[Service],
    out: Path,
    duration_s: float,
    retries: int = 0,
    host_tracer_level: int = 2,
    device_tracer_level: int = 1,
    progress: Callable[[str, float], None] | None = None,
    max_bytes: int | None = None,
) -> Capture:
    """Capture every service concurrently into ``out``: one trace file per host captured.

    ``progress(message, fraction)`` is called while the capture runs; a host's answer larger
    than ``max_bytes`` (default: the capture size cap) is refused. Addresses where nothing
    listens are left out at once (``NothingListening`` if that is all of them); an attempt that
    leaves a host without events is retried (``retries`` more times) with every host still
    reachable. When no attempt captured every host, the attempt that captured the most is kept,
    the others' files removed, and the hosts it lacks are in ``Capture.missing``. With no host
    captured at all: ``CaptureEmpty`` when the hosts' captures held no events, ``CaptureError``
    when the client failed.
    """
    _check_client()
    reachable, missing = _listening(services)
    out.mkdir(parents=True, exist_ok=True)
    options = {
        "host_tracer_level": host_tracer_level,
        "device_tracer_level": device_tracer_level,
        "delay_ms": 0,
        "max_bytes": 0 if max_bytes is None else max_bytes,
    }
    last_problem = ""
    failed = False
    best: _Attempt | None = None
    for attempt in range(retries + 1):
        message = f"capturing {len(reachable)} host(s), attempt {attempt + 1}"
        report = None if progress is None else functools.partial(progress, message)
        sessions, failure, log_text = _capture_once(reachable, out, duration_s, options, report)
        files = sorted(p for s in sessions for p in s.glob("*.xplane.pb"))
        good = [s for s in reachable if has_events(files, s)]
        if not failure and len(good) == len(reachable):
            if best is not None:
                _remove(best[0])  # an earlier attempt's partial session
            return Capture(files, missing)
        empty = [s for s in reachable if s not in good]
        last_problem = _explain(failure, empty, log_text)
        failed = bool(failure) and not _says_empty(failure[0])
        if good and (best is None or len(good) > len(best[2])):
            if best is not None:
                _remove(best[0])
            best = (sessions, files, good, last_problem)
        else:  # an empty or partial session no better than one kept is no use to anyone
            _remove(sessions)
    if best is not None:
        return _partial(best, reachable, missing)
    where = ",".join(map(str, reachable))
    if failed:
        # The client itself failed (not an empty trace): code 13, with its own words.
        raise CaptureError(f"{where}: {last_problem} after {retries + 1} attempt(s)")
    raise CaptureEmpty(
        f"{where}: {last_problem} after {retries + 1} attempt(s). "
        "Capture while the job runs steps: after warm-up compiles, with a --duration that "
        "covers a few steps, and with --retries for busy hosts"
    )


# One attempt that captured some hosts: its session folders, trace files, the hosts with
# events, and what went wrong with the rest.
_Attempt = tuple[list[Path], list[Path], list[Service], str]


def _listening(services: list[Service]) -> tuple[list[Service], list[tuple[Service, str]]]:
    """The services something listens at, and the others with why (``NothingListening`` when
    nothing listens at any)."""
    missing: list[tuple[Service, str]] = []
    reachable: list[Service] = []
    for service in services:
        reason = unreachable(service)
        if reason is None:
            reachable.append(service)
        else:
            missing.append((service, reason))
    if not reachable:
        first, reason = missing[0]
        more = f" (nor at {len(missing) - 1} other address(es))" if len(missing) > 1 else ""
        raise NothingListening(f"{first}: {reason}{more}. {_START_ONE}")
    return reachable, missing


def _capture_once(
    services: list[Service],
    out: Path,
    duration_s: float,
    options: dict[str, int],
    progress: Callable[[float], None] | None,
) -> tuple[list[Path], list[BaseException], str]:
    """One attempt: the session folder it made under ``out`` (as a list: none when it could
    not be made), the first host's error (if any host's call failed) and what was logged
    meanwhile. ``progress(fraction)`` is called while it runs."""
    session = _new_session(out)
    failures: dict[Service, BaseException] = {}
    with tempfile.TemporaryDirectory(prefix="xlaprof-capture-") as private, _quiet_client() as log:

        def work(service: Service) -> None:
            try:
                _capture_host(service, session, Path(private), duration_s, options)
            except BaseException as error:
                failures[service] = error

        workers = [
            threading.Thread(target=work, args=(s,), name=f"xlaprof-capture-{s}", daemon=True)
            for s in services
        ]
        started = time.monotonic()
        for worker in workers:
            worker.start()
        for worker in workers:
            while worker.is_alive():
                worker.join(0.1)
                if progress is not None:
                    progress(min((time.monotonic() - started) / duration_s, 1.0))
        log_text = log.read_text(errors="replace")
    failure = [failures[s] for s in services if s in failures]
    return [session], failure, log_text


def _new_session(out: Path) -> Path:
    """A new session folder ``out/plugins/profile/<time>``, made by this call (never one that
    was there: a name taken gets a suffix)."""
    profile = out / "plugins" / "profile"
    profile.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y_%m_%d_%H_%M_%S")
    for suffix in ("", *(f"_{n}" for n in range(1, 1000))):
        session = profile / f"{stamp}{suffix}"
        try:
            session.mkdir()
        except FileExistsError:
            continue
        return session
    raise CaptureError(f"{profile}: no free session folder name for {stamp}")


def _capture_host(
    service: Service, session: Path, private: Path, duration_s: float, options: dict[str, int]
) -> None:
    """Ask ``service`` for its trace and keep its XSpace as ``session/<host>_<port>.xplane.pb``
    (created exclusively: nothing is written through a name someone planted)."""
    from xlaprof.capture.profiler_service import AnswerError, Request, profile
    from xlaprof.safeio import create_exclusive

    request = Request(
        duration_ms=max(1, int(duration_s * 1000)),
        host_tracer_level=options["host_tracer_level"],
        device_tracer_level=options["device_tracer_level"],
        repository_root=private,
        session_id=session.name,
        host_name=service.file_stem,
    )
    try:
        timeout_s = duration_s + ANSWER_GRACE_SECONDS
        answer = profile(str(service), request, timeout_s, options["max_bytes"] or None)
    except AnswerError as error:
        raise CaptureError(f"{service}: {error}") from None
    if answer.empty_trace:
        raise CaptureError(f"{service}: the server collected no trace data")
    if not answer.xspace:
        return  # no trace came back: the host is named as missing
    fd = create_exclusive(session / f"{service.file_stem}.xplane.pb", 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(answer.xspace)


def _partial(
    best: _Attempt, reachable: list[Service], missing: list[tuple[Service, str]]
) -> Capture:
    """The attempt that captured the most hosts, its hosts without events named as missing."""
    _sessions, files, good, problem = best
    kept = [p for p in files if trace_file_of(p) in {s.file_stem for s in good}]
    for path in set(files) - set(kept):
        path.unlink()  # a host's empty trace: it is named as missing instead
    reason = _short(problem)
    return Capture(kept, missing + [(s, reason) for s in reachable if s not in good])


def _remove(sessions: list[Path]) -> None:
    for session in sessions:
        for path in session.iterdir():
            path.unlink()
        session.rmdir()


def _short(problem: str) -> str:
    """A problem of the whole attempt, as said of one host left out of it."""
    if problem.startswith("no events from "):
        hint = problem.partition(" (")[2]
        return "its capture came back empty" + (f" ({hint}" if hint else "")
    return problem


def _check_client() -> None:
    """The client speaks gRPC: say so plainly when it is not installed."""
    try:
        import grpc  # noqa: F401  (imported to learn whether it can be)
    except ImportError as error:
        raise CaptureError(
            f"the gRPC library cannot be loaded ({error}); install it with `pip install grpcio`"
        ) from None


def trace_file_of(path: Path) -> str:
    """The ``host_port`` stem of a capture's trace file (``host_9012.xplane.pb``)."""
    return path.name.removesuffix(".xplane.pb")


def has_events(files: list[Path], service: Service) -> bool:
    """Whether ``files`` hold ``service``'s capture with at least one event: the file named
    exactly ``host_port.xplane.pb`` (``host_901`` is not ``host_9012``'s), as XProf's client
    names each host's file."""
    for path in files:
        # Exact match: host_901 must not take host_9012.xplane.pb for its own.
        if trace_file_of(path) == service.file_stem and _count_events(path) > 0:
            return True
    return False


# How XProf's client words a capture that ran but collected nothing (an idle job): that is an
# empty capture (15), not a failure of the client (13).
_EMPTY_WORDS = ("did not have trace data", "no responses from clients", "no trace")


def _says_empty(error: BaseException) -> bool:
    return any(words in str(error).lower() for words in _EMPTY_WORDS)


def _explain(failure: list[BaseException], empty: list[Service], log_text: str) -> str:
    if failure:
        message = str(failure[0]).splitlines()[0] if str(failure[0]) else type(failure[0]).__name__
        if _says_empty(failure[0]):
            return f"the capture came back empty ({message})"
        return f"the capture client failed ({message})"
    hosts = ", ".join(map(str, empty))
    hint = next((line for line in log_text.splitlines() if "UNAVAILABLE" in line), "")
    return f"no events from {hosts}" + (f" ({hint.strip()[:160]})" if hint else "")
