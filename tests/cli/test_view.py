"""`xlaprof view` serves traces in the XProf UI: the sample runs', a single capture file's."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import (
    REPO,
    SAMPLE_RUNS,
    SAMPLES,
    TPU,
    cli,
    free_port,
    sample_capture,
    shared_trace,
    view_runs,
)


def test_view_serves_every_traced_run() -> None:
    # GIVEN the sample runs, each traced (--trace-steps 4:6)
    traced = sorted(name for name in SAMPLE_RUNS if sample_capture(name))
    assert len(traced) >= 4
    # WHEN the folder holding them is viewed THEN the UI lists each traced run
    assert view_runs(SAMPLES / "runs") == [f"{name}/" for name in traced]


def test_view_copies_a_single_capture_file_into_a_logdir() -> None:
    # GIVEN one capture file WHEN it is viewed THEN the file is copied into a private logdir
    # the UI can read, and the UI lists it
    assert view_runs(shared_trace(TPU)) == ["xprof_tpu_inference_2_v1/"]


# -- 2: xlaprof view never lets XProf's converter write outside -----------------------------------
def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _hlo_proto(name: str) -> bytes:
    """An ``HloProto`` holding only ``hlo_module.name`` (fields 1 and 1)."""
    encoded = name.encode()
    module = b"\x0a" + _varint(len(encoded)) + encoded
    return b"\x0a" + _varint(len(module)) + module


def test_view_refuses_module_names_that_escape(tmp_path: Path, samples: Path) -> None:
    from xlaprof.parse.xplane import xspace_class

    # GIVEN a real capture whose metadata plane names an HLO module ../../.. + a chosen path
    target = tmp_path / "outside" / "planted"
    target.parent.mkdir()
    source = next((samples / "runs" / "healthy_loop").glob("*/plugins/profile/*/*.xplane.pb"))
    space = xspace_class()()
    space.ParseFromString(source.read_bytes())
    metadata = next(p for p in space.planes if p.name == "/host:metadata")
    stat_id = next(k for k, m in metadata.stat_metadata.items() if m.name == "Hlo Proto")
    entry = next(iter(metadata.event_metadata.values()))
    stat = next(s for s in entry.stats if s.metadata_id == stat_id)
    stat.bytes_value = _hlo_proto("../" * 30 + str(target).lstrip("/"))
    logdir = tmp_path / "logdir" / "plugins" / "profile" / "1"
    logdir.mkdir(parents=True)
    (logdir / "vm.xplane.pb").write_bytes(space.SerializeToString())
    # WHEN it is viewed
    out = cli("view", str(tmp_path / "logdir"), "--port", "1")
    # THEN it is refused at once with its own exit code, one line, and nothing is written
    from xlaprof.errors import UnsafeInput

    assert out.returncode == UnsafeInput.exit_code, out.stderr
    assert out.stderr.count("\n") == 1 and "not a file name" in out.stderr
    assert list(target.parent.iterdir()) == []
    assert sorted(p.name for p in logdir.iterdir()) == ["vm.xplane.pb"]


# -- view, capture, bench --------------------------------------------------------------------------
def test_view_listens_on_loopback_only_by_default() -> None:
    psutil = pytest.importorskip("psutil")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "xlaprof", "view", str(SAMPLES / "runs"), "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout.readline().strip() == f"http://localhost:{port}/"
        listening: list[tuple[str, int]] = []
        deadline = time.monotonic() + 300  # bounds a hang only
        while time.monotonic() < deadline and not any(p == port for _, p in listening):
            time.sleep(0.5)
            listening = [
                (c.laddr.ip, c.laddr.port)
                for c in psutil.Process(process.pid).net_connections(kind="inet")
                if c.status == psutil.CONN_LISTEN
            ]
        assert listening and all(ip == "127.0.0.1" for ip, _ in listening), listening
    finally:
        process.terminate()
        process.wait(timeout=30)
