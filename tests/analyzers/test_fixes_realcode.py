"""Fixes that fit the cause, on real code (issue 47), judged on runs of set-ups recorded once
(sample_traces/realcode_runs/regenerate.py).

What each must say comes from the set-up's docstring and code (the lines marked
``# expect: <kind>``) and from the runtime's own counters in the run's final metrics report
(read with a regular expression), never from xlaprof's output. Each failed before: a
nanoGPT-style gradient-accumulation loop (backward() in the loop's body) was told to use scan,
which cannot hold a backward pass; a REINFORCE episode's loop was placed at the policy call
inside `select_action` rather than at the `for` loop that repeats it, and told to use scan,
though the loop hands each action to the host; torch.distributions' own validation reads
were "your line" with generic advice; and padded sizes rounded to a multiple that rose with the
data (56, 64, 72) were taken for fixed buckets: 1.1 min of later compiles and no finding.
"""

from __future__ import annotations

import sys

import pytest
from helpers import EXAMPLES, REPO, SAMPLES
from recorded import counter, final_metrics, samples

from xlaprof import api
from xlaprof.findings import Finding, Kind

RUNS = SAMPLES / "realcode_runs"
REALCODE = EXAMPLES / "realcode"
sys.path.insert(0, str(EXAMPLES / "corpus"))
import judge  # noqa: E402

pytest.importorskip("google.protobuf")


def analyzed(name: str, kind: Kind) -> list[Finding]:
    return [f for f in api.analyze(RUNS / name, source_root=REPO) if f.kind is kind]


def source_line(name: str, line: int) -> str:
    return (REALCODE / f"{name}.py").read_text().splitlines()[line - 1]


def test_gradient_accumulation_gets_a_sync_per_micro_batch_not_scan() -> None:
    # GIVEN 4 optimizer steps of 4 micro-batches, backward() each, one sync per step: the
    # runtime ran one graph per step (4 executions, 2 compiles)
    name = "nanogpt_grad_accum"
    assert samples(name, "ExecuteTime") == 4 and samples(name, "CompileTime") == 2
    (finding,) = analyzed(name, Kind.UNROLLED_LOOP)
    # THEN the unrolled loop is the micro-batch loop, at its `for` line
    assert finding.location is not None
    assert finding.location.line == judge.marked_line(name, "unrolled_loop", REALCODE)
    assert source_line(name, finding.location.line).lstrip().startswith("for _micro_step")
    # AND its fix is a sync per micro-batch or torch_xla's accumulation helper, never scan
    backward = int(str(finding.evidence["loop_calls_backward"]).rpartition(":")[2])
    assert "loss.backward()" in source_line(name, backward)
    fix = finding.suggestion
    assert "torch_xla.sync()" in fix and "gradient_accumulation" in fix
    assert "scan.scan(" not in fix and "scan_layers(" not in fix


def test_an_episode_loop_reading_each_action_is_placed_at_its_for_and_synced() -> None:
    # GIVEN 4 REINFORCE episodes of 8 steps, each step sampling an action read by .item()
    name = "reinforce_episode"
    assert counter(name, "aten::_local_scalar_dense") == 96
    (loop,) = analyzed(name, Kind.UNROLLED_LOOP)
    # THEN the unrolled loop is placed at the episode's `for`, not at the policy call inside
    # select_action, and its fix is a sync per iteration (scan cannot hand actions out)
    assert loop.location is not None
    assert loop.location.line == judge.marked_line(name, "unrolled_loop", REALCODE)
    assert "for _t in range(STEPS)" in source_line(name, loop.location.line)
    assert "torch_xla.sync()" in loop.suggestion and "per iteration" in loop.suggestion
    assert "scan.scan(" not in loop.suggestion and "torch.where" not in loop.suggestion
    # AND each of the three reads per step is its own finding at its own line: the two that
    # torch.distributions makes name it and validate_args=False
    reads = analyzed(name, Kind.HOST_SYNC)
    lines = judge.marked_lines(name, "host_sync", REALCODE)
    by_line = {f.location.line: f for f in reads if f.location is not None}
    assert sorted(by_line) == lines and len(reads) == 3
    assert all(f.evidence["reads_at_site"] == 32 for f in reads)
    built, sampled, action = (by_line[n] for n in lines)
    for validation in (built, sampled):
        assert "torch/distributions/distribution.py" in str(validation.evidence["library_frame"])
        assert "validate_args=False" in validation.suggestion
    assert "library_frame" not in action.evidence


def test_padded_sizes_that_follow_the_data_are_a_recompilation_not_buckets() -> None:
    # GIVEN batches padded to their longest rounded up to a multiple of 8 over length-sorted
    # data: 56, 64, 72 as the data goes on, each compiled in epoch 1 and reused in epoch 2
    name = "text_cls_growing_buckets"
    assert samples(name, "CompileTime") == 7
    (finding,) = analyzed(name, Kind.RECOMPILATION)
    # THEN it is a recompilation at the collator, its lengths those the batches had
    assert finding.location is not None
    assert finding.location.line == judge.marked_line(name, "recompilation", REALCODE)
    assert sorted(set(finding.evidence["sequence_lengths_seen"])) == [56, 64, 72]
    # AND the fix says these are not fixed buckets and pads to sizes fixed up front, not to
    # the multiple the script already uses
    fix = finding.suggestion
    assert "pad_to_multiple_of=8" in fix and "not fixed buckets" in fix
    assert 'padding="max_length"' in fix
    assert "the collator's pad_to_multiple_of=N" not in fix


def test_trainers_device_side_accumulator_gets_trainers_own_option() -> None:
    # GIVEN Trainer.evaluate() with a compute_metrics and no eval_accumulation_steps: the
    # runtime compiled 23 graphs (8 with eval_accumulation_steps=1, the script says)
    name = "hf_trainer_eval_accumulate"
    assert samples(name, "CompileTime") == 23
    (finding,) = analyzed(name, Kind.RECOMPILATION)
    # THEN the recompilation is at the evaluate() call and named a growing accumulator,
    # concatenated in Trainer's own code, by one batch (8 rows) each step
    assert finding.location is not None
    assert finding.location.line == judge.marked_line(name, "recompilation", REALCODE)
    sizes = finding.evidence["accumulator_sizes"]
    assert sizes[:3] == [8, 16, 24] and "transformers/trainer" in finding.evidence["accumulator_at"]
    assert "accumulator" in finding.title
    # AND the fix is Trainer's accumulate-to-host option, not the generic shape advice
    fix = finding.suggestion
    assert "eval_accumulation_steps=1" in fix
    assert "drop_last=True" not in fix and "mark_dynamic" not in fix


def test_a_sharding_wrappers_set_up_graphs_are_no_recompilation() -> None:
    # GIVEN FSDP with auto-wrapping: its constructor syncs once per wrapped submodule, each
    # a graph of that submodule's parameter shapes; the runtime compiled 5 graphs in all
    name = "fsdp_auto_wrap"
    assert samples(name, "CompileTime") == 5
    # THEN those set-up graphs are not called recompiles (nor given the pad/bucket fix)
    assert analyzed(name, Kind.RECOMPILATION) == []
    # AND the constructor's syncs end no step: the run has the script's 6 training steps
    (steps,) = RUNS.glob(f"{name}/*/steps.jsonl")
    rows = [line for line in steps.read_text().splitlines() if line.strip()]
    source = (REALCODE / f"{name}.py").read_text()
    assert "STEPS = 6" in source and len(rows) == 6


def test_the_accumulation_helpers_device_side_sync_is_no_host_read() -> None:
    # GIVEN torch_xla's gradient_accumulation helper, which syncs its inputs on the device
    # (_xla_sync_multi) before its While loop: the runtime copied nothing to the host
    name = "grad_accum_helper"
    assert "TransferFromDeviceTime" not in final_metrics(name)
    assert samples(name, "CompileTime") == 3
    # THEN no host sync is reported (the debug analysis guesses "user code trying to access
    # tensor value" for that execution), and no unrolled loop either
    assert analyzed(name, Kind.HOST_SYNC) == []
    assert analyzed(name, Kind.UNROLLED_LOOP) == []


def test_a_device_side_augmentation_is_named_with_a_fix_that_can_work() -> None:
    # GIVEN torchvision's RandomErasing applied to each batch on the device: a new box, of a
    # new size, every step; the runtime compiled a graph every step (8 of 8)
    name = "timm_random_erasing"
    assert samples(name, "CompileTime") == 8
    (finding,) = analyzed(name, Kind.RECOMPILATION)
    # THEN it is placed at the user's call of the transform, which it names
    assert finding.location is not None
    assert finding.location.line == judge.marked_line(name, "recompilation", REALCODE)
    assert "torchvision/transforms" in finding.title
    # AND the fix moves the transform to the host or to a fixed-shape mask; no padding advice
    # (a convolution's padding=1 is no padding to the longest)
    fix = finding.suggestion
    assert "on the host" in fix and "fixed-shape mask" in fix
    assert "padding=" not in fix and "sequence length" not in finding.title
