"""xlaprof's own client of a profiler server's ``ProfilerService.Profile``, over gRPC.

Why not XProf's client (``_pywrap_profiler_plugin.trace``): it saves every ``tool_data`` entry
of the server's answer as ``<session>/<host>.<name>``, with ``..`` resolved as text, so a
server (one compromised or misconfigured host of a pod) writes any file it likes on the machine
that captures. Here the server's answer is data, never a path: the one thing kept of it is the
XSpace, and the caller decides where that goes.

The messages are those of the public schema (``tsl/profiler/protobuf/profiler_service.proto``
and ``profiler_options.proto``), built at run time as ``xlaprof.parse.xplane.schema`` builds
the XSpace's, and parsed by the protobuf runtime's C code. The answer's XSpace is kept as bytes
(the same wire format): it is parsed later, by the reader every capture goes through.

Servers answer in one of two ways, and both are taken:

* with ``emit_xspace`` (recent XLA): the XSpace is in the answer (``ProfileResponse.xspace``);
* older servers (torch_xla 2.9's) ignore ``emit_xspace`` and save the XSpace themselves, as
  ``<repository_root>/<session_id>/<host_name>.xplane.pb`` on *their* file system: the request
  names a private folder of this process's, so a server on this machine writes there and
  nowhere the capture would read by accident, and the file is read from there (a regular file,
  not a link, capped). A server on another machine saves it on its own disk, out of reach, as
  with XProf's client.

The answer is capped (``max_receive_message_length``): a server cannot make this process hold
more than the capture size cap (``--max-size`` / ``$XLAPROF_MAX_SIZE``, else protobuf's 2 GiB).
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xlaprof.safeio import DEFAULT_XPLANE_LIMIT, read_capped

PROFILE_METHOD = "/tensorflow.ProfilerService/Profile"
# How long past the capture's own duration a server may take to collect and answer.
ANSWER_GRACE_SECONDS = 120.0
_PACKAGE = "tensorflow"
_OPTIONS_VERSION = 1  # ProfileOptions.version: the levels below are read as given
_BUILDING = threading.Lock()

# The schema's fields this client sends or reads: (message, field, number, type[, message]).
_FIELDS: dict[str, tuple[tuple[str, int, str, str | None], ...]] = {
    "ProfileOptions": (
        ("include_dataset_ops", 1, "BOOL", None),
        ("host_tracer_level", 2, "UINT32", None),
        ("device_tracer_level", 3, "UINT32", None),
        ("python_tracer_level", 4, "UINT32", None),
        ("version", 5, "UINT32", None),
        ("duration_ms", 9, "UINT64", None),
    ),
    "ProfileRequest": (
        ("duration_ms", 1, "UINT64", None),
        ("opts", 4, "MESSAGE", "ProfileOptions"),
        ("repository_root", 5, "STRING", None),
        ("session_id", 6, "STRING", None),
        ("host_name", 7, "STRING", None),
        ("emit_xspace", 9, "BOOL", None),
    ),
    "ProfileToolData": (
        ("name", 1, "STRING", None),
        ("data", 2, "BYTES", None),
    ),
    "ProfileResponse": (
        ("tool_data", 6, "MESSAGE", "ProfileToolData"),
        ("empty_trace", 7, "BOOL", None),
        ("xspace", 8, "BYTES", None),  # an XSpace message: the same wire format
    ),
}


def _message(name: str) -> Any:
    """A message class of the schema above. Hosts are asked from one thread each: the classes
    are built once, under a lock (two pools would make two classes of each message, and a
    message field refuses the other pool's class)."""
    with _BUILDING:
        return _messages()[name]


@functools.cache
def _messages() -> dict[str, Any]:
    from google.protobuf import message_factory

    pool = _pool()
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in _FIELDS
    }


@functools.cache
def _pool() -> Any:
    """The messages above as one descriptor pool (one, so a message field takes its class)."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto as Field

    proto = descriptor_pb2.FileDescriptorProto(
        name="xlaprof_profiler_service.proto", package=_PACKAGE, syntax="proto3"
    )
    for message, fields in _FIELDS.items():
        described = proto.message_type.add(name=message)
        for field_name, number, kind, of in fields:
            repeated = field_name == "tool_data"
            added = described.field.add(
                name=field_name,
                number=number,
                type=Field.Type.Value(f"TYPE_{kind}"),
                label=Field.LABEL_REPEATED if repeated else Field.LABEL_OPTIONAL,
            )
            if of is not None:
                added.type_name = f".{_PACKAGE}.{of}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return pool


@dataclass(frozen=True)
class Request:
    """What to ask one server: how long, how much, and the names the server may use."""

    duration_ms: int
    host_tracer_level: int
    device_tracer_level: int
    repository_root: Path  # a private folder of this process's (older servers save there)
    session_id: str
    host_name: str  # a sanitized file stem: the server's saved file is <host_name>.xplane.pb

    def encode(self) -> bytes:
        options = _message("ProfileOptions")(
            version=_OPTIONS_VERSION,
            host_tracer_level=self.host_tracer_level,
            device_tracer_level=self.device_tracer_level,
            duration_ms=self.duration_ms,
        )
        request = _message("ProfileRequest")(
            duration_ms=self.duration_ms,
            opts=options,
            repository_root=str(self.repository_root),
            session_id=self.session_id,
            host_name=self.host_name,
            emit_xspace=True,
        )
        data: bytes = request.SerializeToString()
        return data

    @property
    def saved_by_server(self) -> Path:
        """Where a server on this machine that ignores ``emit_xspace`` saves the XSpace."""
        return self.repository_root / self.session_id / f"{self.host_name}.xplane.pb"


@dataclass
class Answer:
    """One server's answer: its XSpace (bytes), whether it said the trace was empty, and the
    names of the tool-data entries it sent besides (never written anywhere)."""

    xspace: bytes | None
    empty_trace: bool
    ignored: list[str] = field(default_factory=list)


class AnswerError(Exception):
    """The server did not answer, refused, or answered with what is not a ``ProfileResponse``
    (its message is a few words on why)."""


def answer_limit(max_bytes: int | None = None) -> int:
    """The most bytes one answer may hold: ``max_bytes`` (``xlaprof capture --max-size``), else
    the largest capture analysis reads by default, within gRPC's own maximum."""
    return min(DEFAULT_XPLANE_LIMIT if max_bytes is None else max_bytes, 2**31 - 1)


def profile(
    address: str, request: Request, timeout_s: float, max_bytes: int | None = None
) -> Answer:
    """Ask the server at ``address`` (``host:port``) for ``request``'s capture; its answer.

    ``AnswerError`` when it does not answer in ``timeout_s``, refuses, sends more than
    ``answer_limit(max_bytes)`` bytes or sends bytes that are not a ``ProfileResponse``.
    """
    import grpc

    limit = answer_limit(max_bytes)
    options = [
        ("grpc.max_receive_message_length", limit),
        ("grpc.max_send_message_length", 1024**2),
        ("grpc.enable_http_proxy", 0),
    ]
    with grpc.insecure_channel(address, options=options) as channel:
        call = channel.unary_unary(PROFILE_METHOD)
        try:
            raw = call(request.encode(), timeout=timeout_s)
        except grpc.RpcError as error:
            raise AnswerError(_rpc_problem(error, limit)) from None
    return _answer(raw, request, limit)


def _rpc_problem(error: Any, limit: int) -> str:
    import grpc

    code = error.code() if callable(getattr(error, "code", None)) else None
    details = error.details() if callable(getattr(error, "details", None)) else ""
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return (
            f"its answer is larger than {limit} bytes (the capture size cap; "
            "XLAPROF_MAX_SIZE raises it)"
        )
    name = code.name if code is not None else type(error).__name__
    first = str(details or "").splitlines()[0][:200] if details else ""
    return f"{name}" + (f": {first}" if first else "")


def _answer(raw: bytes, request: Request, limit: int) -> Answer:
    from google.protobuf.message import DecodeError

    response = _message("ProfileResponse")()
    try:
        response.ParseFromString(raw)
    except DecodeError:
        raise AnswerError("its answer is not a ProfileResponse") from None
    ignored = [entry.name for entry in response.tool_data]
    if response.xspace:  # (an empty XSpace is no bytes: then an older server saved it)
        return Answer(bytes(response.xspace), response.empty_trace, ignored)
    return Answer(_saved_by_server(request, limit), response.empty_trace, ignored)


def _saved_by_server(request: Request, limit: int) -> bytes | None:
    """The XSpace a server on this machine saved in the private folder, if it did: read only as
    a regular file that is no link, and capped."""
    from xlaprof.safeio import TooLarge, UnsafeFile

    path = request.saved_by_server
    try:
        return read_capped(path, limit, follow=False)
    except FileNotFoundError:
        return None
    except TooLarge:
        raise AnswerError(
            f"its trace is larger than {limit} bytes (the capture size cap; XLAPROF_MAX_SIZE "
            "raises it)"
        ) from None
    except (OSError, UnsafeFile) as error:
        raise AnswerError(f"its saved trace cannot be read ({error})") from None
