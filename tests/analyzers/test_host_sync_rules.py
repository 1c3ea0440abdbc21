"""host_sync and aten_fallback on fixed inputs: which reads split a step, the share of steps
holding a read, reads inside a library, and a pasted ``Op(s) not lowered`` log.

The events are the shapes real runs recorded (examples/realcode: gcn_eval_three_sizes,
closures_and_eval, hf_bert_finetune, hf_trainer_bert, pasted_unlowered_log), reduced to what
the rules read; the set-ups themselves are judged end to end in tests/corpus/test_realcode.py.
"""

from __future__ import annotations

from xlaprof.analyzers import aten_fallback, host_sync
from xlaprof.model.input import AnalysisInput, StepRow
from xlaprof.parse.debug_log import DebugEvent, DebugLog, FallbackRecord, parse_debug_log
from xlaprof.parse.frames import Frame
from xlaprof.parse.metrics_report import HOST_SYNC_OP

SCRIPT = "/home/user/train.py"
SITE = "/venv/lib/python3.11/site-packages"
SYNC_FRAMES = [Frame("sync", f"{SITE}/torch_xla/torch_xla.py", 87)]
READ = "most likely user code trying to access tensor value"


def _sync(step: int, graph: str, line: int = 40) -> DebugEvent:
    frames = [*SYNC_FRAMES, Frame("main", SCRIPT, line)]
    return DebugEvent("execution", "user torch_xla.sync", graph, frames=frames, step=step)


def _read(step: int, graph: str, frames: list[Frame]) -> DebugEvent:
    return DebugEvent("execution", READ, graph, frames=frames, step=step)


def _item(step: int, frames: list[Frame]) -> FallbackRecord:
    return FallbackRecord(op=HOST_SYNC_OP, count=1, frames=frames, step=step)


def _data(
    steps: int,
    events: list[DebugEvent],
    records: tuple[FallbackRecord, ...] | list[FallbackRecord] = (),
    executions: int = 1,
) -> AnalysisInput:
    """``steps`` step rows of ``executions`` executions each, with the debug events given."""
    rows = [StepRow(step=step, executions=executions) for step in range(steps)]
    return AnalysisInput(debug=DebugLog(events=events, fallbacks=list(records)), steps=rows)


def test_an_evaluation_read_after_the_sync_splits_nothing_and_is_occasional() -> None:
    # GIVEN 20 training steps whose sync (line 40) runs the same graph, and every 5 steps an
    # evaluation after the sync that reads 6 values (line 44, through evaluate() at line 12)
    eval_frames = [Frame("evaluate", SCRIPT, 12), Frame("main", SCRIPT, 44)]
    events = []
    for step in range(20):
        if step and step % 5 == 0:
            events += [_read(step, f"eval{i}", eval_frames) for i in range(6)]
        events.append(_sync(step, "train" if step else "warmup"))
    data = _data(20, events)
    # WHEN host_sync judges it THEN there is no finding: 3 of 20 steps hold a read, and each
    # read ran only the evaluation's own graph
    assert host_sync.analyze(data) == []


def test_a_read_after_the_sync_is_no_split_even_when_the_next_graph_differs() -> None:
    # GIVEN reads after the sync every 3 of 12 steps, the step after each running a training
    # graph of its own (closures_and_eval: 28 graph inputs instead of 26 after an evaluation)
    frames = [Frame("main", SCRIPT, 53)]
    events = []
    for step in range(12):
        if step and step % 3 == 0:
            events.append(_read(step, "eval", frames))
            events.append(_sync(step, "train-after-eval", line=48))
        else:
            events.append(_sync(step, "train", line=48))
    data = _data(12, events)
    # WHEN host_sync judges it THEN nothing is reported (3 of 12 steps, no split)
    assert host_sync.analyze(data) == []


def test_the_share_counts_steps_holding_a_read_not_reads() -> None:
    # GIVEN 11 reads at one line, in 2 of 8 steps, after those steps' graph ran (a log point)
    frames = [Frame("log", SCRIPT, 70), Frame("main", SCRIPT, 60)]
    events, records = [], []
    for step in range(8):
        events.append(_sync(step, "train", line=60))
        if step in (3, 7):
            records += [_item(step, frames) for _ in range(6 if step == 3 else 5)]
    data = _data(8, events, records)
    # WHEN host_sync judges it THEN 11 reads in 2 of 8 steps are no finding
    assert host_sync.analyze(data) == []


def _mask_read_stack() -> list[Frame]:
    library = [
        Frame("_ignore_bidirectional_mask_sdpa", f"{SITE}/transformers/masking_utils.py", 354),
        Frame("sdpa_mask", f"{SITE}/transformers/masking_utils.py", 521),
        Frame("create_bidirectional_mask", f"{SITE}/transformers/masking_utils.py", 1100),
        Frame("wrapped_func", f"{SITE}/transformers/utils/deprecation.py", 173),
        Frame("_create_attention_masks", f"{SITE}/transformers/models/bert/modeling_bert.py", 708),
        Frame("forward", f"{SITE}/transformers/models/bert/modeling_bert.py", 665),
        Frame("wrapped_func", f"{SITE}/transformers/utils/deprecation.py", 173),
        Frame("wrapper", f"{SITE}/transformers/utils/output_capturing.py", 361),
        Frame("_call_impl", f"{SITE}/torch/nn/modules/module.py", 1881),
    ]
    return [*library, Frame("main", SCRIPT, 47), Frame("<module>", SCRIPT, 57)]


def test_a_library_read_in_every_step_is_named_with_a_fix_that_works() -> None:
    # GIVEN transformers' mask check reading a value mid-forward in each of 10 steps: torch_xla
    # printed 8 frames (no user frame), the fallback tracker's record has the whole stack
    stack = _mask_read_stack()
    events, records = [], []
    for step in range(10):
        events.append(_read(step, "mask", stack[:8]))
        records.append(_item(step, stack))
        events.append(_sync(step, "train", line=52))
    data = _data(10, events, records, executions=2)
    # WHEN host_sync judges it
    (finding,) = host_sync.analyze(data)
    # THEN it sits at the user's model call, splits each step, and the fix names the library's
    # function with what avoids it from the user's side (measured: a 4-D mask, or none)
    assert str(finding.location) == f"{SCRIPT}:47"
    assert finding.evidence["splits_step_graph"] is True
    assert finding.evidence["steps_with_reads"] == 10
    assert "transformers" in finding.title and "in 10 of 10 steps" in finding.title
    assert "splitting the step's graph in two (20 executions for 10 steps)" in finding.title
    assert "masking_utils" in finding.suggestion and "4-D" in finding.suggestion
    assert "add_step_closure" not in finding.suggestion


def test_no_step_closure_advice_to_a_script_that_uses_them() -> None:
    # GIVEN a read before the sync in every step, and reads made inside step closures
    closure = [Frame("_run_step_closures", f"{SITE}/torch_xla/core/xla_model.py", 900)]
    events, records = [], []
    for step in range(6):
        events.append(_read(step, "part", [Frame("main", SCRIPT, 30)]))
        events.append(_sync(step, "rest"))
        records.append(_item(step, [*closure, Frame("log", SCRIPT, 10)]))
    data = _data(6, events, records)
    # WHEN host_sync judges it THEN the reads inside closures are not reported (they are the
    # reads torch_xla recommends) and the fix does not tell the script to adopt add_step_closure
    (finding,) = host_sync.analyze(data)
    assert finding.location.line == 30 and "add_step_closure" not in finding.suggestion


PASTED = (
    "pt-xla-profiler: Op(s) not lowered: aten::median,  Please open a GitHub issue with the "
    "above op lowering requests.\n"
) * 6


def test_a_pasted_not_lowered_log_reports_the_op_unlocated() -> None:
    # GIVEN only the "Op(s) not lowered" lines PT_XLA_DEBUG=1 printed for a run using median
    data = AnalysisInput(debug=parse_debug_log(PASTED))
    # WHEN aten_fallback judges it
    (finding,) = aten_fallback.analyze(data)
    # THEN median is reported without a line or a call count, and the fix says how to get both
    assert finding.location is None and finding.evidence["count"] is None
    assert finding.title == "aten::median does not lower: named in 6 `Op(s) not lowered` lines"
    assert "xlaprof run" in finding.suggestion and "torch.sort" in finding.suggestion
