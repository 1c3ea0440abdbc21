"""Recompilation on real code (issue 29): the corpus set-ups of examples/realcode, recorded once.

Each run directory in sample_traces/realcode_runs/ is a real `xlaprof run` of a real-code set-up
(sample_traces/realcode_runs/regenerate.py says how, and which two are made smaller), so these
tests read what the runtime wrote, with no torch_xla needed. What each must say comes from the
set-up's docstring and examples/realcode/corpus.toml (the bare runtime's counts and the line
marked ``# expect: recompilation``), never from xlaprof's output. Every one of these was wrong
before: GCN's three evaluation sizes and Trainer's logging graphs were called recompilations,
the cosine schedule's baked constant and wlm's slice bounds landed on the sync line, MNIST's
short batch on the accumulator, GPT-2's grown tokens gave two findings (one without a line),
and Mixtral's routed-token counts were "likely the batch size".
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import EXAMPLES, REPO, SAMPLES

from xlaprof import api
from xlaprof.findings import Finding, Kind

ROOT = REPO
RUNS = SAMPLES / "realcode_runs"
REALCODE = EXAMPLES / "realcode"
sys.path.insert(0, str(EXAMPLES / "corpus"))
import judge  # noqa: E402

pytest.importorskip("google.protobuf")


def recompilations(name: str) -> list[Finding]:
    """The recompilation findings of a recorded run, source lines read from this checkout."""
    findings = api.analyze(RUNS / name, source_root=ROOT)
    return [f for f in findings if f.kind == Kind.RECOMPILATION]


def marked(name: str) -> int:
    return judge.marked_line(name, "recompilation", REALCODE)


def where(finding: Finding) -> tuple[str, int]:
    assert finding.location is not None, finding.title
    return Path(finding.location.file).name, finding.location.line


@pytest.mark.parametrize("name", ["gcn_eval_three_sizes", "hf_trainer_bert"])
def test_fixed_shapes_each_compiled_once_and_reused_are_not_a_recompilation(name: str) -> None:
    # GIVEN GCN's evaluate() compiling its three index-set sizes at its first call, or Trainer
    # compiling its logging graphs at the first log point, every graph reused afterwards
    # WHEN the run is analyzed THEN no recompilation is reported
    assert recompilations(name) == []


def test_a_baked_weight_decay_factor_is_named_at_the_optimizer_step() -> None:
    # GIVEN the cosine schedule whose last learning rate makes AdamW's 1 - lr*wd round to 1.0
    (finding,) = recompilations("hf_bert_cosine_lr")
    # THEN the finding is at the optimizer step (from the baked input's stack in the graph,
    # though the late graph itself was traced without lines), says what was baked in, and the
    # fix is the one that works (a floor), not XLA_NO_SPECIAL_SCALARS
    assert where(finding) == ("hf_bert_cosine_lr.py", marked("hf_bert_cosine_lr"))
    assert finding.evidence["change_kind"] == "baked_value"
    assert "baked in as the constant 1" in finding.title
    assert finding.evidence["compile_steps"] == [0, 1, 11]
    assert "weight_decay" in finding.suggestion and "6e-8" in finding.suggestion
    assert "XLA_NO_SPECIAL_SCALARS=1 does not prevent" in finding.suggestion


def test_slice_bounds_baked_in_are_found_at_the_slicing_line() -> None:
    # GIVEN word_language_model's source[i : i + seq_len] on a device-resident corpus
    (finding,) = recompilations("wlm_get_batch")
    # THEN the finding is at the slice in get_batch, names the bounds in order, and says to
    # index with a tensor instead of the sync line's generic advice
    assert where(finding) == ("wlm_get_batch.py", marked("wlm_get_batch"))
    assert finding.evidence["change_kind"] == "attribute"
    assert "slice bounds" in finding.title and "[0:10]" in finding.title
    assert "index_select" in finding.suggestion


def test_a_short_last_batch_is_named_at_the_loader_loop() -> None:
    # GIVEN MNIST through MpDeviceLoader with a per-epoch accumulator and a last batch of 4
    (finding,) = recompilations("mp_mnist_short_batch")
    # THEN the finding is at the loop that yields batches, names 16 -> 4 and drop_last
    assert where(finding) == ("mp_mnist_short_batch.py", marked("mp_mnist_short_batch"))
    assert "16 → 4" in finding.title
    assert "drop_last=True" in finding.suggestion


def test_an_input_grown_by_reassignment_is_one_finding_at_the_line_that_grows_it() -> None:
    # GIVEN GPT-2 greedy decoding, tokens = torch.cat([tokens, next_token], 1) each step: the
    # model's mask helper (a read inside transformers) and the step's sync both compile anew
    (finding,) = recompilations("hf_gpt2_decode")
    # THEN one finding, at the reassignment, covering both sites, with a fixed-size buffer fix
    assert where(finding) == ("hf_gpt2_decode.py", marked("hf_gpt2_decode"))
    assert len(finding.evidence["cut_sites"]) == 2
    assert finding.evidence["compiles_at_site"] == 16
    assert "final size" in finding.suggestion


def test_data_dependent_routing_inside_transformers_is_found_at_the_model_call() -> None:
    # GIVEN Mixtral's eager experts loop (torch.where(mask) per expert) in a one-layer config
    (finding,) = recompilations("mixtral_one_layer")
    # THEN the finding is at the user's model call, calls the shapes data-dependent (never a
    # batch size) and gives transformers' own remedy
    source = (RUNS / "mixtral_one_layer.py").read_text().splitlines()
    line = next(n for n, text in enumerate(source, 1) if "out = model(" in text)
    assert where(finding) == ("mixtral_one_layer.py", line)
    assert finding.evidence["change_kind"] == "data_dependent"
    assert "batch size" not in finding.title + str(finding.evidence["what_changed"])
    assert 'experts_implementation="batched_mm"' in finding.suggestion


def test_a_read_deep_inside_a_library_keeps_the_users_line() -> None:
    # GIVEN GPT-2's mask helper reading a device value 17 or more frames below the user's call
    # (torch_xla prints 8 frames by default: the read then had no user frame, and GPT-2 got a
    # second recompilation finding with no location)
    from xlaprof.parse.frames import user_location
    from xlaprof.rundir.reader import load_run

    (run,) = [load_run(p.parent) for p in (RUNS / "hf_gpt2_decode").glob("*/run.json")]
    # WHEN the run's debug events are read
    reads = [
        e
        for e in run.debug_log().compilations()
        if any(f.file and f.file.endswith("masking_utils.py") for f in e.frames)
    ]
    # THEN xlaprof run asked for deeper stacks, and each such compile names the model call
    assert run.info.env["PT_XLA_DEBUG_MAX_FRAME"] == "64"
    assert reads and all(len(e.frames) > 8 for e in reads)
    line = next(
        n
        for n, text in enumerate((REALCODE / "hf_gpt2_decode.py").read_text().splitlines(), 1)
        if "logits = model(tokens" in text
    )
    assert {where_of(user_location(e.frames)) for e in reads} == {("hf_gpt2_decode.py", line)}


def where_of(location: object) -> tuple[str, int] | None:
    if location is None:
        return None
    return Path(location.file).name, location.line  # type: ignore[attr-defined]
