"""Every analyzer on one input (``xlaprof.analyzers.run_analyzers``): real job logs, the live
runtime's own, and logs in the shapes older releases wrote (tests/data)."""

from __future__ import annotations

from pathlib import Path

from helpers import findings_for, live_runtime_line

from xlaprof.analyzers import run_analyzers
from xlaprof.findings import Kind
from xlaprof.inputs.paths import load_text_inputs


def test_healthy_loop_has_no_findings(samples) -> None:
    assert findings_for(samples / "healthy_loop.log", samples / "healthy_loop.fallbacks") == []


def test_xrt_report_findings(data_dir) -> None:
    findings = findings_for(data_dir / "xrt_2019_metrics.txt")
    kinds = {f.kind for f in findings}
    assert kinds == {Kind.RECOMPILATION, Kind.HOST_SYNC, Kind.ATEN_FALLBACK}
    fallback = next(f for f in findings if f.kind == Kind.ATEN_FALLBACK)
    # _local_scalar_dense is a host sync, never an op fallback
    assert fallback.evidence["op"] == "aten::_ctc_loss"
    host = next(f for f in findings if f.kind == Kind.HOST_SYNC)
    assert host.evidence["device_to_host_transfers"] == 260


def test_old_profiler_log_is_attributed_to_user_frames(data_dir) -> None:
    findings = findings_for(data_dir / "old_profiler.log")
    by_kind = {f.kind: f for f in findings}
    assert by_kind[Kind.RECOMPILATION].evidence == {"compiles": 21, "steps": 11, "log_line": 4}
    fallbacks = {f.evidence["op"]: f for f in findings if f.kind == Kind.ATEN_FALLBACK}
    # torch's own functional.py frame is skipped for the user's model.py line
    assert str(fallbacks["aten::_ctc_loss"].location) == "/home/user/model.py:88"
    # the backward op is only named in the "Op(s) not lowered" line: reported, unlocated
    backward = fallbacks["aten::_ctc_loss_backward"]
    assert backward.location is None and "xlaprof run" in backward.suggestion
    assert str(by_kind[Kind.HOST_SYNC].location) == "/home/user/train_ctc.py:120"


def test_fallbacks_of_the_live_runtime_are_located_at_the_users_line(
    live_runtime_job, tmp_path: Path
) -> None:
    stdout, stderr, tracker = live_runtime_job
    log_file = tmp_path / "job.log"
    log_file.write_text(stdout + stderr)
    data, _ = load_text_inputs([log_file, tracker])
    findings = run_analyzers(data)
    fallback = next(f for f in findings if f.kind == Kind.ATEN_FALLBACK)
    assert fallback.evidence["op"] == "aten::median"
    assert fallback.location.line == live_runtime_line("MEDIAN")
    recompile = next(f for f in findings if f.kind == Kind.RECOMPILATION)
    assert recompile.location.line == live_runtime_line("LOOP SYNC")
    host = next(f for f in findings if f.kind == Kind.HOST_SYNC)
    assert host.location.line == live_runtime_line("MEDIAN") and host.evidence["reads_at_site"] == 3
