"""Eager mode: per-op compiles and executions counted from the metrics eager mode fills, and
the ``eager_mode`` finding with its fix. The end-to-end case (GPT-2 under
``eager_mode(True)``, compile counts equal to the bare runtime's) is the real-code set-up
``eager_mode_gpt2`` (tests/corpus/test_realcode.py); these are the analysis's fixed inputs."""

from __future__ import annotations

from pathlib import Path

from xlaprof.analyzers import eager_mode
from xlaprof.inputs.paths import load_text_inputs
from xlaprof.model.input import AnalysisInput
from xlaprof.rundir.schema import StepRow
from xlaprof.tables.timeline import from_metrics

# The shape of torch_xla 2.9's metrics_report() after 4 eager steps (values as the runtime
# printed them for examples/realcode/eager_mode_gpt2.py): CompileTime and ExecuteTime absent.
EAGER_REPORT = """\
Metric: EagerOpCompileTime
  TotalSamples: 225
  Accumulator: 11s460ms210.341us
  ValueRate: 611ms041.329us / second
  Rate: 12.7752 / second
  Percentiles: 1%=010ms310.102us; 5%=012ms007.334us; 50%=032ms129.443us; 99%=243ms100.221us
Metric: EagerOpExecuteTime
  TotalSamples: 3114
  Accumulator: 861ms149.000us
  ValueRate: 033ms513.000us / second
  Rate: 176.3 / second
  Percentiles: 1%=010.020us; 5%=012.117us; 50%=099.315us; 99%=002ms101.101us
Counter: CachedCompile
  Value: 2889
Counter: ExecuteComputation
  Value: 3114
Counter: MarkStep
  Value: 4
Counter: UncachedCompile
  Value: 225
"""


def _eager_rows(per_step: list[int]) -> list[StepRow]:
    return [
        StepRow(
            step=n,
            wall_s=0.06,
            eager=True,
            eager_compiles=225 if n == 0 else 0,
            eager_compile_s=3.92 if n == 0 else 0.0,
            eager_executions=count,
            eager_execute_s=0.05,
        )
        for n, count in enumerate(per_step)
    ]


def test_a_pasted_eager_report_counts_the_ops_the_runtime_counted(tmp_path: Path) -> None:
    # GIVEN the metrics report of an eager-mode run, pasted
    report = tmp_path / "metrics.txt"
    report.write_text(EAGER_REPORT)
    data, _ = load_text_inputs([report])
    # WHEN it is analyzed THEN compiles and executions are the runtime's UncachedCompile and
    # ExecuteComputation counters, not 0
    assert data.compiles() == data.counters()["UncachedCompile"] == 225
    assert data.executions() == data.counters()["ExecuteComputation"] == 3114
    # AND eager mode is the finding: 3114 op executions over 4 steps, with the fix
    (finding,) = eager_mode.analyze(data)
    assert finding.evidence["op_executions_per_step"] == 3114 / 4
    assert "225 per-op compiles (11.46 s)" in finding.title
    assert "torch_xla.compile" in finding.suggestion and finding.location is None


def test_eager_steps_from_a_run_give_the_steady_cost_and_the_users_line() -> None:
    # GIVEN per-step rows of an eager run and the line that turned eager mode on
    data = AnalysisInput(
        steps=_eager_rows([879, 745, 745, 742]),
        eager_mode=True,
        eager_mode_site="/job/train.py:23",
    )
    (finding,) = eager_mode.analyze(data)
    # THEN the steady steps' median is the cost per step, at the user's line
    assert finding.evidence["op_executions_per_step"] == 743.5
    assert finding.evidence["eager_op_compiles"] == 225
    assert (finding.location.file, finding.location.line) == ("/job/train.py", 23)
    # AND the timeline shows the eager compile and device time instead of 0.00
    first = from_metrics(data.steps)[0]
    assert first["compile_s"] == 3.92 and first["device_busy_s"] == 0.05


def test_a_compiled_step_under_eager_mode_is_not_eager_bound() -> None:
    # GIVEN eager mode left on with the step wrapped in torch_xla.compile: only the inputs'
    # few ops run eagerly (2 a step on the GPT-2 set-up, benchmarks/eager_mode.py)
    data = AnalysisInput(steps=_eager_rows([9, 5, 5, 5]), eager_mode=True)
    # THEN there is no eager_mode finding
    assert eager_mode.analyze(data) == []


def test_eager_steps_an_older_xlaprof_did_not_split_show_not_measured() -> None:
    # GIVEN an eager run recorded by an xlaprof that did not read the eager-op metrics per step
    rows = [StepRow(step=0, wall_s=22.4, host_cpu_s=2.4, eager=True), StepRow(step=1, eager=True)]
    # THEN its per-step compile and device time are not measured, never 0.00
    first = from_metrics(rows)[0]
    assert first["compile_s"] is None and first["device_busy_s"] is None
    assert first["python_tracing_s"] is None


def test_an_input_without_eager_records_is_unmeasured() -> None:
    # GIVEN a pasted debug log alone (no metrics report, no run) THEN eager mode is unmeasured
    assert eager_mode.unmeasured(AnalysisInput()) is not None
    assert eager_mode.unmeasured(AnalysisInput(eager_mode=False)) is None
