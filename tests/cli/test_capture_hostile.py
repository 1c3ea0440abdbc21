"""`xlaprof capture` against a hostile profiler server: a local fake gRPC server on 127.0.0.1
that answers ``ProfilerService/Profile`` with a real XSpace and what else it likes.

The fake's answers are written by hand on the wire (``ProfileResponse``: tool_data = 6 with
name = 1 and data = 2, xspace = 8, as the public ``profiler_service.proto`` numbers them), so
nothing of xlaprof's own encoding is taken on trust. What must hold (issue 38): the capture
writes only the XSpace of each host, under its own name, in a session folder it made; no field
of the answer names a path; an answer over the size cap is a clean one-line error.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from helpers import cli, sample_capture

from xlaprof.errors import CaptureError
from xlaprof.inputs.traces import load_trace


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _tool_data(name: str, data: bytes) -> bytes:
    return _field(6, _field(1, name.encode()) + _field(2, data))


@pytest.fixture
def fake_server() -> Iterator[Callable[[bytes], int]]:
    """Start a fake profiler server on 127.0.0.1 that answers every Profile call with the
    given bytes; the port it listens on."""
    servers: list[grpc.Server] = []

    def start(answer: bytes) -> int:
        def profile(_request: bytes, _context: grpc.ServicerContext) -> bytes:
            return answer

        handler = grpc.method_handlers_generic_handler(
            "tensorflow.ProfilerService",
            {"Profile": grpc.unary_unary_rpc_method_handler(profile)},
        )
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=2),
            options=[("grpc.max_send_message_length", 2**31 - 1)],
        )
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return port

    yield start
    for server in servers:
        server.stop(0)


def _capture(port: int, out: Path, *more: str):
    return cli(
        "capture", "--service", f"127.0.0.1:{port}", "--duration", "200ms", "--out", str(out),
        *more, timeout=120,
    )  # fmt: skip


def test_a_servers_tool_data_names_no_path(tmp_path: Path, fake_server) -> None:
    # GIVEN a server that answers with a real XSpace and a tool-data entry whose name climbs out
    # of the session folder (XProf's client saves <session>/<host>.<name>, `..` resolved as
    # text: out/plugins/profile/<session>/127.0.0.1_PORT.x/../../../../../TARGET is TARGET here)
    xspace = sample_capture("healthy_loop").read_bytes()
    payload = b"echo owned\n"
    answer = _field(8, xspace) + _tool_data("x/../../../../../TARGET", payload)
    answer += _tool_data("xplane.pb", b"not an xspace")
    port = fake_server(answer)
    out = tmp_path / "out"
    # WHEN it is captured
    result = _capture(port, out)
    # THEN the capture succeeds with the one file it chose: the XSpace, byte for byte, under
    # the host name given, in a session folder under --out
    assert result.returncode == 0, result.stderr
    (listed,) = [Path(line) for line in result.stdout.split()]
    assert listed.name == f"127.0.0.1_{port}.xplane.pb"
    assert listed.parent.parent == out / "plugins" / "profile"
    assert listed.read_bytes() == xspace
    # and nothing else was written, anywhere the server named
    assert not (tmp_path / "TARGET").exists()
    written = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert written == [listed]
    assert not any(payload in p.read_bytes() for p in written)
    assert load_trace(out).events.shape[0] > 0  # the kept XSpace is the capture


def test_an_answer_over_the_size_cap_is_a_clean_error(tmp_path: Path, fake_server) -> None:
    # GIVEN a server whose answer (a real XSpace) is larger than the capture size cap
    xspace = sample_capture("healthy_loop").read_bytes()
    port = fake_server(_field(8, xspace))
    out = tmp_path / "out"
    cap = len(xspace) // 2
    # WHEN it is captured under that cap
    result = _capture(port, out, "--max-size", str(cap))
    # THEN one line says the answer is over the cap; nothing is kept
    assert result.returncode == CaptureError.exit_code, result.stderr
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert f"larger than {cap} bytes" in line
    assert not list(out.rglob("*.xplane.pb"))


def test_an_answer_that_is_not_a_profile_response_is_a_clean_error(
    tmp_path: Path, fake_server
) -> None:
    # GIVEN a server that answers with bytes that are no protobuf message (a truncated field)
    port = fake_server(b"\x42\xff\xff\xff\x0f" + os.urandom(16))
    out = tmp_path / "out"
    result = _capture(port, out)
    # THEN the capture fails in one line and keeps nothing
    assert result.returncode == CaptureError.exit_code, result.stderr
    assert "not a ProfileResponse" in result.stderr and "Traceback" not in result.stderr
    assert not list(out.rglob("*.xplane.pb"))
