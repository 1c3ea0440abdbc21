"""The PT_XLA_DEBUG parser (``xlaprof.parse.debug_log``): 2.x analysis blocks, pt-xla-profiler
lines, the fallback tracker; on real logs (the samples, the live runtime's own) and any text."""

from __future__ import annotations

import pytest
from helpers import live_runtime_line
from hypothesis import given, settings
from hypothesis import strategies as st

from xlaprof.parse.debug_log import parse_debug_log
from xlaprof.parse.frames import Frame
from xlaprof.parse.metrics_report import parse_metrics_report


def test_real_recompile_log(samples) -> None:
    log = parse_debug_log((samples / "recompile_varying_batch.log").read_text())
    assert log.warnings == []
    compilations = log.compilations()
    assert len(compilations) >= 4
    first = compilations[0]
    assert first.cause == "user torch_xla.sync"
    assert first.graph_hash and len(first.graph_hash) == 32
    assert first.graph_inputs and first.graph_outputs
    assert first.frames[0].function == "sync"
    assert any(f.file.endswith("examples/recompile_varying_batch.py") for f in first.frames)
    assert first.memory is not None and first.memory.input_bytes is not None
    assert len(log.executions()) >= 12


def test_real_fallback_tracker(samples) -> None:
    log = parse_debug_log((samples / "cpu_fallback.fallbacks").read_text())
    ops = {record.op for record in log.fallbacks}
    assert "aten::median" in ops
    median = next(r for r in log.fallbacks if r.op == "aten::median")
    assert median.frames[0].file.endswith("examples/cpu_fallback.py")


def test_variants(data_dir) -> None:
    log = parse_debug_log((data_dir / "debug_variants.log").read_text())
    execution, dynamo, no_frames, cut = log.events
    # singular wording "Number of Graph Input:"
    assert (execution.graph_inputs, execution.graph_outputs) == (1, 1)
    assert "access tensor value" in execution.cause
    # a block with no Graph Info section, behind a log prefix
    assert dynamo.graph_hash is None and dynamo.frames == [
        Frame("forward", "/home/user/model.py", 12)
    ]
    # a block cut off by the next one is kept and flagged, and gets its memory analysis
    assert no_frames.truncated and no_frames.graph_inputs == 35
    assert no_frames.memory.input_bytes == pytest.approx(1.548 * 1024**3)
    assert no_frames.memory.aliased_input_bytes is None  # "Unknown"
    # the file ends mid-block, mid-frame
    assert cut.truncated and cut.graph_outputs == 107 and cut.frames[0].function == "mark_step"
    # ... and its last frame, cut inside the path's line number, is kept as cut (the line
    # number may have lost digits, so it is not trusted)
    assert cut.frames[1] == Frame("train_loop_fn", "/home/user/train.py", None, cut=True)
    assert str(cut.frames[1]) == "/home/user/train.py…"


@pytest.mark.parametrize(
    ("line", "ops"),
    [
        # as torch_xla prints it (a GitHub issue's paste, with its logging prefix)
        (
            "2023-05-02 10:01:12 WARNING pt-xla-profiler: Op(s) not lowered: aten::multinomial,"
            "  Please open a GitHub issue with the above op lowering requests.",
            ["aten::multinomial"],
        ),
        # the message alone, without the profiler's prefix
        ("Op(s) not lowered: aten::multinomial", ["aten::multinomial"]),
        # inside a sentence, two ops
        (
            "I keep getting Op(s) not lowered: aten::_ctc_loss, aten::nonzero when training",
            ["aten::_ctc_loss", "aten::nonzero"],
        ),
        ("Op(s) not lowered: median, histc", ["aten::median", "aten::histc"]),
    ],
)
def test_not_lowered_anywhere_in_a_line(line: str, ops: list[str]) -> None:
    log = parse_debug_log(f"some unrelated line\n{line}\nanother line\n")
    assert [(r.op, r.count, r.line) for r in log.fallbacks] == [(op, 1, 2) for op in ops]


def test_old_profiler_lines(data_dir) -> None:
    log = parse_debug_log((data_dir / "old_profiler.log").read_text())
    assert [(n.metric, n.count, n.steps) for n in log.too_frequent] == [
        ("TransferFromServerTime", 33, 2),
        ("CompileTime", 21, 11),
    ]
    ops = [(r.op, r.count) for r in log.fallbacks]
    assert ("aten::_ctc_loss", 1) in ops and ("aten::_ctc_loss_backward", 1) in ops
    groups = [r for r in log.fallbacks if r.frames]
    assert [(g.op, g.count) for g in groups] == [
        ("aten::_local_scalar_dense", 27),
        ("aten::_ctc_loss", 11),
    ]
    assert str(groups[1].frames[1]) == "/home/user/model.py:88"


@settings(max_examples=200)
@given(
    st.lists(
        st.sampled_from(
            [
                "Compilation Analysis: " + "=" * 80,
                "Compilation Analysis: Compilation Cause",
                "Execution Analysis:   Graph Hash: abc",
                "Compilation Analysis:   Number of Graph Inputs: x",
                "Post Compilation Analysis: Graph input size: 1.0 GB",
                "pt-xla-profiler: FRAME (count=2):",
                "[TAG xla_fallback From Thread 1]",
                "Frames:",
                "  f (a.py:1)",
                "C++ Frames:",
                "garbage ( :",
            ]
        ),
        max_size=30,
    ),
    st.text(max_size=20),
)
def test_never_raises(lines: list[str], noise: str) -> None:
    log = parse_debug_log("\n".join([*lines, noise]))
    assert isinstance(log.events, list)


@settings(max_examples=150)
@given(text=st.text(max_size=400))
def test_any_text_parses_and_its_warnings_name_lines(text: str) -> None:
    # GIVEN any text WHEN it is parsed as a debug log THEN it parses and every warning names a
    # line
    debug = parse_debug_log(text)
    assert all(w.line >= 0 for w in debug.warnings)


def test_debug_log_of_the_live_runtime_agrees_with_its_metrics(live_runtime_job) -> None:
    stdout, stderr, _tracker = live_runtime_job
    log = parse_debug_log(stderr)
    assert log.warnings == []
    full = parse_metrics_report(stdout).reports[0]
    assert len(log.compilations()) == full.metrics["CompileTime"].total_samples
    assert len(log.executions()) == full.metrics["ExecuteTime"].total_samples
    hashes = {
        e.graph_hash
        for e in log.compilations()
        if e.frames[-1].line == live_runtime_line("LOOP SYNC")
    }
    assert len(hashes) == 3  # batch sizes 4, 6 and 3
