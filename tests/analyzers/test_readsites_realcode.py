"""Read sites, fallback names, cached sizes, compile accounting and padding on real code
(issue 37, part B), judged on runs of real-code set-ups recorded once.

Each run directory in sample_traces/realcode_runs/ is a real `xlaprof run` of a set-up of
examples/realcode (sample_traces/realcode_runs/regenerate.py made them), so these tests read what
the runtime wrote, with no torch_xla needed. What each must say comes from the set-up's code and
docstring and from the runtime's own counters in the run's final metrics report (read here with
a regular expression, not through xlaprof), never from xlaprof's output. Each failed before:
generate's reads were all put at one library frame, the evaluation loop's reads in
word_language_model were dropped, isin was reported twice under two spellings, the GAN's short
batch was "10 compilations" blamed on the batch, the padded text batches were "a batch
dimension" at `.to(device)` with drop_last advice, and the graph-attention script's three index
sets were a recompilation.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import EXAMPLES, REPO, SAMPLES
from recorded import counter, samples

from xlaprof import api
from xlaprof.findings import Finding, Kind, Severity

RUNS = SAMPLES / "realcode_runs"
REALCODE = EXAMPLES / "realcode"
sys.path.insert(0, str(EXAMPLES / "corpus"))
import judge  # noqa: E402

pytest.importorskip("google.protobuf")


def findings(name: str, kind: Kind) -> list[Finding]:
    """The findings of one kind of a recorded run, source lines read from this checkout."""
    return [f for f in api.analyze(RUNS / name, source_root=REPO) if f.kind == kind]


def compiles(name: str) -> int:
    """CompileTime's samples in the run's final metrics report: the runtime's compile count."""
    return samples(name, "CompileTime")


def where(finding: Finding) -> tuple[str, int]:
    assert finding.location is not None, finding.title
    return Path(finding.location.file).name, finding.location.line


def marked(name: str, kind: str, script: str | None = None) -> tuple[str, int]:
    return f"{script or name}.py", judge.marked_line(script or name, kind, REALCODE)


def test_each_read_site_inside_generate_is_its_own_evidence_line() -> None:
    # GIVEN model.generate() on XLA, 2 calls of 10 new tokens: transformers reads the device at
    # its EOS check (a CPU-fallback isin) and at its own stop test once per token
    (finding,) = findings("hf_generate_reads", Kind.HOST_SYNC)
    assert where(finding) == marked("hf_generate_reads", "host_sync")
    # THEN each place is its own line, with its library frame, count and wait
    sites = finding.evidence["read_sites"]
    eos = next(s for s in sites if "generation/stopping_criteria.py" in s["library_frame"])
    # (generate's stop test is StopCheck.__call__ in generation/utils.py)
    stop = next(
        s
        for s in sites
        if s["library_frame"].startswith("__call__ (transformers/generation/utils.py")
    )
    assert "generation/utils.py" in stop["library_frame"]
    assert eos["reads"] == stop["reads"] == 2 * 10
    assert eos["cpu_fallback_op"] == "aten::isin.Tensor_Tensor"
    assert eos["forced_executions"] == 20 and eos["wait_seconds"] is not None
    # AND the title counts what the lines count, and the advice is per site
    assert finding.evidence["reads_at_site"] == sum(
        s["reads"] for s in finding.evidence["read_sites"]
    )
    assert "eos_token_id = None" in finding.suggestion
    assert "unfinished_sequences.max() == 0" in finding.suggestion


def test_a_fallback_op_is_reported_once_under_the_counters_name() -> None:
    # GIVEN the same run: the metrics count aten::isin.Tensor_Tensor, the fallback tracker names
    # at::_ops::isin_Tensor_Tensor
    (finding,) = findings("hf_generate_reads", Kind.ATEN_FALLBACK)
    # THEN one finding, under the counter's name and count, at the generate call
    assert finding.evidence["op"] == "aten::isin.Tensor_Tensor"
    assert finding.evidence["count"] == counter("hf_generate_reads", "aten::isin.Tensor_Tensor")
    assert where(finding) == marked("hf_generate_reads", "aten_fallback")


def test_reads_in_the_training_and_the_evaluation_loop_are_each_found() -> None:
    # GIVEN word_language_model's loss.item() per training batch (12) and per validation batch
    # (2 evaluations of 4 batches), the second in a loop with no sync
    found = {where(f): f for f in findings("wlm_item_reads", Kind.HOST_SYNC)}
    source = (REALCODE / "wlm_item_reads.py").read_text().splitlines()
    lines = [n for n, text in enumerate(source, 1) if "# expect: host_sync" in text]
    assert len(lines) == 2
    # THEN both lines have a finding, with their own counts and the wait the reads cost
    assert set(found) == {("wlm_item_reads.py", n) for n in lines}
    evaluation, training = (found[("wlm_item_reads.py", n)] for n in lines)
    assert training.evidence["reads_at_site"] == 12
    assert evaluation.evidence["reads_at_site"] == 8
    (site,) = evaluation.evidence["read_sites"]
    assert site["forced_executions"] == 8 and site["wait_seconds"] is not None
    assert "loop over data" in evaluation.title
    # AND the two findings' reads are the runtime's .item() count
    assert counter("wlm_item_reads", "aten::_local_scalar_dense") == 12 + 8


def test_three_fixed_index_sets_each_compiled_once_are_not_a_recompilation() -> None:
    # GIVEN the graph-attention script: test() on the train and validation index sets every
    # epoch before the sync (compiled in the first two, reused after), and on the test set once
    # in the last epoch: a third fixed size, its graphs compiled after warm-up
    # THEN no recompilation is reported (it was "10 compilations of 10 different graphs (2
    # after warm-up): input 0 (s64) dim 0 takes 500 → 1000")
    assert findings("gat_three_index_sets", Kind.RECOMPILATION) == []


def test_a_short_gan_batch_counts_only_the_compiles_drop_last_removes() -> None:
    # GIVEN the DCGAN loop: 3 mid-step .item() reads split each step into 4 graphs, and the
    # last batch of each epoch is short (8 -> 4)
    (finding,) = findings("dcgan_short_batch", Kind.RECOMPILATION)
    counted = finding.evidence["compiles"]
    # THEN all the runtime's compiles are accounted for, and only the short batch's 4 (one per
    # graph of its step) are the cause; the rest are warm-up and split-off graphs
    assert counted["total"] == compiles("dcgan_short_batch")
    assert counted["recompiles"] == 4
    assert counted["warm_up"] + counted["split_off_by_reads"] == counted["total"] - 4
    assert counted["split_off_by_reads"] > 0
    assert finding.title.startswith(f"Recompiling: 4 of {counted['total']} compilations")
    assert "8 → 4" in finding.title and "split off by mid-step reads" in finding.title
    # AND it is a warning at the loop that takes the batches, with drop_last as the fix
    assert finding.severity == Severity.WARNING
    assert where(finding) == marked("dcgan_short_batch", "recompilation")
    assert "drop_last=True" in finding.suggestion


def test_a_padded_sequence_length_is_found_at_the_padding_with_bucket_sizes() -> None:
    # GIVEN text classification with DataCollatorWithPadding (padding="longest"), batches of 8
    # in data order, 2 epochs
    (finding,) = findings("text_cls_dynamic_padding", Kind.RECOMPILATION)
    # AND the lengths each batch had, from the data (the script's own generator: each batch is
    # padded to its longest sentence, in words; the tokenizer adds no special tokens)
    import torch

    generator = torch.Generator().manual_seed(0)
    words = torch.randint(4, 41, (48,), generator=generator).tolist()
    lengths = [max(words[i : i + 8]) for i in range(0, 48, 8)] * 2
    # THEN one finding, at the collator, naming the sequence length, never a batch dimension
    assert where(finding) == marked("text_cls_dynamic_padding", "recompilation")
    assert "sequence length (dim 1)" in finding.title
    assert "batch dimension" not in finding.title + finding.suggestion
    assert "Pass drop_last" not in finding.suggestion
    assert 'padding="longest" wins' in finding.suggestion
    # AND the choices are computed from those lengths: graphs and extra padding for each
    assert finding.evidence["sequence_lengths_seen"] == lengths
    choices = {c["choice"]: c for c in finding.evidence["padding_choices"]}
    longest = choices[f"pad every batch to {max(lengths)} (the longest seen)"]
    assert longest["graphs"] == 1
    assert longest["extra_padding"] == pytest.approx(
        sum(max(lengths) - n for n in lengths) / sum(lengths), abs=1e-4
    )
    sixteen = choices["multiples of 16"]
    assert sixteen["sizes"] == sorted({-(-n // 16) * 16 for n in lengths})


def test_padding_to_multiples_of_16_removes_the_recompiles_in_xlaprof_diff() -> None:
    # GIVEN the same script run with DataCollatorWithPadding(pad_to_multiple_of=16)
    after = "text_cls_pad_multiple_16"
    # THEN it is no recompilation (two bucket sizes, each reused), and diff shows compiles gone
    assert findings(after, Kind.RECOMPILATION) == []
    assert compiles(after) < compiles("text_cls_dynamic_padding")
    import json

    from helpers import cli

    before = RUNS / "text_cls_dynamic_padding"
    # (source lines read from this checkout, as findings() reads them: a run records the
    # folder it ran in, which a fresh clone elsewhere does not have)
    result = cli("diff", "--json", "--source-root", str(REPO), str(before), str(RUNS / after))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    figures = {row["metric"]: row for row in document["comparison"]}
    assert figures["compilations"]["before"] == compiles("text_cls_dynamic_padding")
    assert figures["compilations"]["after"] == compiles(after)
    assert any("sequence length" in title for title in document["findings_disappeared"])
    assert not any("Recompiling" in title for title in document["findings_appeared"])
