"""`xlaprof report`: the HTML report a user opens, from each kind of input."""

from __future__ import annotations

from pathlib import Path

from helpers import DATA, SAMPLES, TPU, cli, shared_trace


def test_report_of_a_single_capture_file(tmp_path: Path) -> None:
    # GIVEN one TPU capture file WHEN it is reported THEN the HTML has the device section with
    # the XLA Ops line's ops
    page = tmp_path / "tpu.html"
    result = cli("report", str(shared_trace(TPU)), "-o", str(page))
    assert result.returncode == 0, result.stderr
    text = page.read_text()
    assert "Each device over the capture" in text and "broadcast_add_fusion.1" in text
    assert "TPU v6 Lite" in text


# -- reports, diff, facade -------------------------------------------------------------------------
def test_report_of_the_shipped_old_profiler_log(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = cli("report", str(DATA / "old_profiler.log"), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "aten_fallback" in out.read_text()


def test_report_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    out.write_text("mine")
    result = cli("report", str(SAMPLES / "runs" / "healthy_loop"), "-o", str(out))
    assert result.returncode == 11 and out.read_text() == "mine"
