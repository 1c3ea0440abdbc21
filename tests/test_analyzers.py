"""Analyzers on real captures (sample_traces/) and on hand-built edge cases."""

from __future__ import annotations

import pytest
from helpers import line_of

from xlaprof.analyzers import run_analyzers
from xlaprof.findings import Kind, Severity
from xlaprof.inputs.paths import load_text_inputs
from xlaprof.model.input import AnalysisInput, StepRow
from xlaprof.parse.debug_log import DebugEvent, DebugLog
from xlaprof.parse.frames import Frame


def findings_for(*paths):
    data, _sources = load_text_inputs(list(paths))
    return run_analyzers(data)


def test_healthy_loop_has_no_findings(samples) -> None:
    assert findings_for(samples / "healthy_loop.log", samples / "healthy_loop.fallbacks") == []


def test_varying_batch_is_a_recompilation_at_the_sync_line(samples) -> None:
    findings = findings_for(samples / "recompile_varying_batch.log")
    assert [f.kind for f in findings] == [Kind.RECOMPILATION]
    finding = findings[0]
    assert finding.location.line == line_of("recompile_varying_batch", "        torch_xla.sync()")
    assert finding.location.file.endswith("examples/recompile_varying_batch.py")
    # 5 batch sizes cycle: 5 distinct graphs (plus the step-1 optimizer-state graph)
    assert finding.evidence["distinct_graphs"] >= 5
    assert finding.evidence["recompiles_after_warmup"] >= 3


@pytest.mark.parametrize("with_tracker", [True, False])
def test_item_each_step_is_a_host_sync_at_the_item_line(samples, with_tracker: bool) -> None:
    paths = [samples / "host_sync_item.log"]
    if with_tracker:
        paths.append(samples / "host_sync_item.fallbacks")
    findings = findings_for(*paths)
    assert [f.kind for f in findings] == [Kind.HOST_SYNC]
    assert findings[0].location.line == line_of("host_sync_item", "history.append(loss.item())")
    assert findings[0].evidence["reads_at_site"] >= 12
    assert findings[0].severity == Severity.WARNING


@pytest.mark.parametrize("with_tracker", [True, False])
def test_median_is_a_fallback_not_a_host_sync(samples, with_tracker: bool) -> None:
    paths = [samples / "cpu_fallback.log"]
    if with_tracker:
        paths.append(samples / "cpu_fallback.fallbacks")
    findings = findings_for(*paths)
    assert [f.kind for f in findings] == [Kind.ATEN_FALLBACK]
    finding = findings[0]
    assert finding.evidence["op"] == "aten::median" and finding.evidence["count"] == 12
    assert finding.location.line == line_of("cpu_fallback", "scale = torch.median")
    source = finding.evidence["location_source"]
    assert source == ("fallback tracker" if with_tracker else source)
    if not with_tracker:
        assert source.startswith("inferred")


def test_xrt_report_findings(data_dir) -> None:
    findings = findings_for(data_dir / "xrt_2019_metrics.txt")
    kinds = {f.kind for f in findings}
    assert kinds == {Kind.RECOMPILATION, Kind.HOST_SYNC, Kind.ATEN_FALLBACK}
    fallback = next(f for f in findings if f.kind == Kind.ATEN_FALLBACK)
    # _local_scalar_dense is a host sync, never an op fallback
    assert fallback.evidence["op"] == "aten::_ctc_loss"
    host = next(f for f in findings if f.kind == Kind.HOST_SYNC)
    assert host.evidence["device_to_host_transfers"] == 260


def test_slow_compile_on_tpu_sized_report(data_dir) -> None:
    (finding,) = findings_for(data_dir / "tpu_slow_compile.txt")
    assert finding.kind == Kind.SLOW_COMPILE
    assert finding.evidence["mean_compile_seconds"] == pytest.approx(9774.123456789 / 4)
    assert "initialize_cache" in finding.suggestion


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


def _compile(step: int | None, graph: str, line: int = 10) -> DebugEvent:
    return DebugEvent(
        kind="compilation",
        cause="user torch_xla.sync",
        graph_hash=graph,
        frames=[
            Frame("sync", "/x/site-packages/torch_xla/torch_xla.py", 87),
            Frame("m", "t.py", line),
        ],
        step=step,
    )


def test_two_warmup_graphs_are_not_a_recompilation() -> None:
    data = AnalysisInput(debug=DebugLog(events=[_compile(0, "a"), _compile(1, "b")]))
    assert run_analyzers(data) == []


def test_with_steps_a_late_first_compile_is_not_a_recompilation() -> None:
    # A logging graph first compiled at step 10 compiles once: not a recompilation.
    events = [_compile(0, "a"), _compile(1, "b"), _compile(10, "c", line=20)]
    data = AnalysisInput(debug=DebugLog(events=events), steps=[StepRow(step=i) for i in range(12)])
    assert run_analyzers(data) == []


def test_with_steps_recompiling_every_step_is_an_error() -> None:
    events = [_compile(i, f"g{i}") for i in range(8)]
    data = AnalysisInput(debug=DebugLog(events=events), steps=[StepRow(step=i) for i in range(8)])
    (finding,) = run_analyzers(data)
    assert finding.kind == Kind.RECOMPILATION and finding.severity == Severity.ERROR
    assert finding.evidence["compile_steps"] == list(range(8))
    assert str(finding.location) == "t.py:10"


def _run(step: int, graph: str, line: int = 10) -> DebugEvent:
    event = _compile(step, graph, line)
    event.kind = "execution"
    return event


def test_a_few_fixed_shapes_compiled_at_first_use_and_reused_are_not_a_recompilation() -> None:
    # GIVEN an evaluation site that compiles three sizes at its first call (step 5), runs each
    # compiled graph, and reuses all three at later evaluations (gcn_eval_three_sizes)
    events = [_compile(0, "train"), _run(0, "train"), _compile(1, "train1"), _run(1, "train1")]
    for size in ("140", "500", "1000"):
        events += [_compile(5, size, line=20), _run(5, size, line=20)]
    for step in (10, 15):
        events += [_run(step, size, line=20) for size in ("140", "500", "1000")]
    data = AnalysisInput(debug=DebugLog(events=events), steps=[StepRow(step=i) for i in range(16)])
    # WHEN it is analyzed THEN nothing is called a recompilation
    assert run_analyzers(data) == []


def test_a_compile_after_the_site_ran_cached_graphs_is_a_recompilation() -> None:
    # GIVEN a loop whose graph is compiled at steps 0 and 1, reused at steps 2-5, and compiled
    # anew at step 6 (a short last batch), then reused at later epochs
    events = [_compile(0, "a"), _run(0, "a"), _compile(1, "b"), _run(1, "b")]
    events += [_run(step, "b") for step in range(2, 6)]
    events += [_compile(6, "short"), _run(6, "short"), _run(13, "short")]
    data = AnalysisInput(debug=DebugLog(events=events), steps=[StepRow(step=i) for i in range(14)])
    # WHEN it is analyzed THEN the late compile is a recompilation (a warning: one step of many)
    (finding,) = run_analyzers(data)
    assert finding.kind == Kind.RECOMPILATION and finding.severity == Severity.WARNING
    assert finding.evidence["recompiles_after_warmup"] == 1


def test_a_metrics_report_without_a_step_count_says_so(data_dir) -> None:
    # GIVEN a real CPU report from a loop that reads each result with .cpu() and never syncs (12
    # compiles, no MarkStep counter; tests/data/README.md)
    findings = findings_for(data_dir / "no_markstep_metrics.txt")
    # WHEN it is analyzed THEN the recompilation title says the step count is not measured, and
    # the evidence holds no step count
    (finding,) = [f for f in findings if f.kind == Kind.RECOMPILATION]
    assert finding.title.startswith("12 compilations")
    assert "None" not in finding.title and "not in the report" in finding.title
    assert finding.evidence["steps"] is None
