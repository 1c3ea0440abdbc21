"""Recompilations (``xlaprof.analyzers.recompilation``): where a graph keeps compiling, judged
per site after its warm-up, at the user's line; from the debug log, the run's steps and
dynamo's records."""

from __future__ import annotations

from helpers import dynamo_rows, findings_for, line_of

from xlaprof.analyzers import recompilation, run_analyzers
from xlaprof.findings import Kind, Location, Severity
from xlaprof.model.input import AnalysisInput
from xlaprof.parse.debug_log import DebugEvent, DebugLog
from xlaprof.parse.dynamo_log import parse_dynamo_records
from xlaprof.parse.frames import Frame
from xlaprof.rundir.schema import StepRow

FILE = "/home/user/train.py"  # the script dynamo's messages in tests/data/dynamo.jsonl name


def test_varying_batch_is_a_recompilation_at_the_sync_line(samples) -> None:
    findings = findings_for(samples / "recompile_varying_batch.log")
    assert [f.kind for f in findings] == [Kind.RECOMPILATION]
    finding = findings[0]
    assert finding.location.line == line_of("recompile_varying_batch", "        torch_xla.sync()")
    assert finding.location.file.endswith("examples/recompile_varying_batch.py")
    # 5 batch sizes cycle: 5 distinct graphs (plus the step-1 optimizer-state graph)
    assert finding.evidence["distinct_graphs"] >= 5
    assert finding.evidence["recompiles_after_warmup"] >= 3


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


def event(kind: str, line: int = 10) -> DebugEvent:
    return DebugEvent(kind=kind, frames=[Frame("main", "/home/u/train.py", line)])  # type: ignore[arg-type]


def _warmup_and_late(events: list[DebugEvent]) -> tuple[int, int]:
    """How many of one site's compilations the analysis takes as warm-up, and how many as
    recompilations, as its finding says (no finding: every compilation was warm-up)."""
    findings = recompilation.analyze(AnalysisInput(debug=DebugLog(events=events)))
    if not findings:
        return len([e for e in events if e.kind == "compilation"]), 0
    (finding,) = findings
    late = finding.evidence["recompiles_after_warmup"]
    return finding.evidence["compiles_at_site"] - late, late


def test_warmup_is_judged_per_site() -> None:
    c, e = "compilation", "execution"
    # optimizer state on the site's second call: warm-up, even if that call is at step 7
    assert _warmup_and_late([event(c), event(e), event(c), event(e), event(e)]) == (2, 0)
    # a new graph after the site once reused a cached one: a recompilation
    assert _warmup_and_late([event(c), event(e), event(e), event(c), event(e)]) == (1, 1)
    # a first graph of no inputs (total = torch.zeros(...) flushed by the loop's first sync)
    # is set-up: the two graphs after it are still warm-up
    setup = DebugEvent(kind="compilation", graph_inputs=0, frames=event(c).frames)
    events = [setup, event(e), event(c), event(e), event(c), event(e), event(e)]
    assert _warmup_and_late(events) == (3, 0)
    # every call compiles: beyond two, recompilations
    assert _warmup_and_late([event(k) for _ in range(5) for k in (c, e)]) == (2, 3)


def test_a_site_with_warmup_only_gets_no_finding() -> None:
    c, e = "compilation", "execution"
    events = [event(c), event(e), event(c), event(e), *[event(e) for _ in range(6)]]
    assert recompilation.analyze(AnalysisInput(debug=_log(events))) == []


def _log(events):  # type: ignore[no-untyped-def]
    from xlaprof.parse.debug_log import DebugLog

    return DebugLog(events=events)


def test_one_recompile_finding_per_cause_with_the_sizes_seen() -> None:
    data = AnalysisInput(dynamo=parse_dynamo_records(dynamo_rows()))
    (finding,) = recompilation.analyze(data)
    assert finding.kind == Kind.RECOMPILATION
    evidence = finding.evidence
    assert evidence["sizes_seen"] == [16, 12, 9]
    assert evidence["recompiles"] == 2 and evidence["recompile_steps"] == [1, 2]
    assert evidence["dynamo_compiles_at_call"] == 3
    assert evidence["call_site"] == f"{FILE}:38"
    # the source is not readable here, so the finding stays at the call
    assert finding.location == Location(FILE, 38)
    assert "mark_dynamic" in finding.suggestion


def test_a_titles_count_is_the_runs_or_says_whose_it_is() -> None:
    """The run directories at hand (the bundled samples and the real-code runs): a
    recompilation title's "X of N compilations" is the run's own count (the counts table's,
    torch_xla's CompileTime), or names the site it counts and the run's count beside it."""
    import re

    from helpers import REPO, SAMPLE_RUNS, analyzed_inputs, sample_run

    runs = [sample_run(name) for name in SAMPLE_RUNS]
    runs += sorted(p for p in (REPO / "sample_traces" / "realcode_runs").iterdir() if p.is_dir())
    titled = 0
    for path in runs:
        work = analyzed_inputs(path)
        compiles = work.data.compiles()
        for finding in work.result.findings:
            found = re.match(
                r"Recompiling: \d+ of (\d+) compilations( at th\w+ [\w ]*sites?)?", finding.title
            )
            if finding.kind != Kind.RECOMPILATION or found is None:
                continue
            titled += 1
            of_the_run = re.search(r"\(the run's (\d+)\)", finding.title)
            if found.group(2) is None:
                assert int(found.group(1)) == compiles, (path, finding.title, compiles)
            else:
                assert of_the_run is not None and int(of_the_run.group(1)) == compiles
                assert int(found.group(1)) < compiles, (path, finding.title)
    assert titled >= 3
