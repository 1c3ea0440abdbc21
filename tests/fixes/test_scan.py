"""The scan_layers fix texts of the unrolled-loop analysis, run: each rewrite it writes must do
what it says on the real runtime (same outputs and gradients as the loop, a `while` in the
graph), for layers called as `layer(hidden, mask) -> (hidden, probs)` and for a stack a library
(timm) applies. And `xlaprof bench scan` on such a model: measured, or refused in one line.

The module tree and each stack's call are recorded by the real ModuleRecorder on a real
forward; only the graph is a hand-built HLO of as many identical blocks as there are layers.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from builders import graph, hlo
from helpers import EXAMPLES, cli

torch = pytest.importorskip("torch")

from xlaprof.analyzers import unrolled_loop  # noqa: E402
from xlaprof.capture.modules import ModuleRecorder  # noqa: E402
from xlaprof.errors import FixFailed  # noqa: E402
from xlaprof.findings import bench_command  # noqa: E402
from xlaprof.fixes.variants import carry_plan  # noqa: E402
from xlaprof.model.input import AnalysisInput  # noqa: E402
from xlaprof.model.sources import SourceFiles  # noqa: E402
from xlaprof.parse.frames import is_library_file  # noqa: E402
from xlaprof.rundir.reader import load_run  # noqa: E402

DEPTH, WIDTH = 6, 16
DECODER = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, 2, batch_first=True)

    def forward(self, hidden, mask):
        normed = self.norm(hidden)
        attended, probs = self.attn(normed, normed, normed, attn_mask=mask)
        return hidden + attended, probs


class Decoder(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList([Block(width) for _ in range(depth)])

    def forward(self, hidden, mask):
        for layer in self.layers:
            hidden, _probs = layer(hidden, mask)
        return hidden
"""
LOOP_LINE = DECODER.splitlines().index("        for layer in self.layers:") + 1


def _recorded(model: Any, *inputs: Any) -> dict[str, Any]:
    """modules.json as the capture writes it, for one forward of ``model``."""
    recorder = ModuleRecorder(is_library_file)
    recorder.start()
    try:
        model(*inputs)
    finally:
        recorder.stop()
    return json.loads(json.dumps(recorder.summary()))


def _finding(modules: dict[str, Any], block_file: str, roots: Path) -> Any:
    data = AnalysisInput(graphs=[graph(hlo(DEPTH, 10, block_file, 3))], modules=modules)
    data.sources = SourceFiles([roots])  # read only under a source root (issue 16)
    (finding,) = unrolled_loop.analyze(data)
    return finding


def _code(suggestion: str) -> str:
    """The code block of a fix text (its lines indented by four spaces), dedented."""
    lines = [line for line in suggestion.splitlines() if line.startswith("    ") or not line]
    block = "\n".join(lines).strip("\n")
    return textwrap.dedent(block)


def _run(model: Any, forward: Any) -> tuple[Any, dict[str, Any], str]:
    """Loss, gradients and the graph's HLO text of one forward and backward on the device."""
    import torch_xla

    model.zero_grad(set_to_none=True)
    loss = forward().float().pow(2).mean()
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    text = torch_xla._XLAC._get_xla_tensors_hlo([loss, *grads.values()])
    torch_xla.sync()
    return loss.cpu(), {n: g.cpu() for n, g in grads.items()}, text


def _same(before: tuple[Any, dict[str, Any], str], after: tuple[Any, dict[str, Any], str]):  # type: ignore[no-untyped-def]
    assert torch.allclose(before[0], after[0], rtol=1e-4, atol=1e-5)
    assert before[1].keys() == after[1].keys() and before[1]
    for name, grad in before[1].items():
        assert torch.allclose(grad, after[1][name], rtol=1e-4, atol=1e-5), name
    assert "while" not in before[2] and "while" in after[2]  # one layer, looped on device


@pytest.mark.runtime
def test_the_carry_rewrite_for_layers_taking_a_mask_and_returning_a_tuple_works(
    tmp_path: Path,
) -> None:
    import torch_xla

    # GIVEN a decoder whose loop calls `hidden, _probs = layer(hidden, mask)`, its module tree
    # and layer call recorded on one forward
    source = tmp_path / "decoder.py"
    source.write_text(DECODER)
    namespace: dict[str, Any] = {"__name__": "decoder_under_test"}
    exec(compile(DECODER, str(source), "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["Decoder"](WIDTH, DEPTH)
    hidden = torch.randn(2, 5, WIDTH)
    mask = torch.triu(torch.full((5, 5), float("-inf")), diagonal=1)
    modules = _recorded(model, hidden, mask)
    # WHEN the unrolled loop is analyzed
    finding = _finding(modules, str(source), tmp_path)
    # THEN it is at the loop, and the rewrite carries the mask and drops the per-layer probs
    assert finding.location.line == LOOP_LINE
    fix = finding.suggestion
    assert "scan_layers(self.layers, x)" not in fix and "(hidden, mask)" in fix
    assert "(_probs) are dropped" in fix
    assert "called with the state (a tensor), argument 2 (a tensor)" in fix
    # AND the code it gives, run as it says, computes what the loop computes, as a loop on
    # the device
    code = _code(fix)
    definitions, _comment, statement = code.rpartition("\n# in Decoder.forward")[0], "", ""
    statement = code.splitlines()[-1]
    device = torch_xla.device()
    model = model.to(device)
    hidden, mask = hidden.to(device), mask.to(device)
    scope: dict[str, Any] = {}
    exec(definitions, scope)

    def scanned() -> Any:
        local = {**scope, "self": model, "hidden": hidden, "mask": mask}
        exec(statement, local)
        return local["hidden"]

    _same(_run(model, lambda: model(hidden, mask)), _run(model, scanned))


@pytest.mark.runtime
def test_a_stack_timm_applies_is_named_as_timms_and_the_swap_it_gives_works() -> None:
    timm = pytest.importorskip("timm")
    import torch_xla

    # GIVEN timm's VisionTransformer (its blocks an nn.Sequential that timm's forward calls)
    torch.manual_seed(0)
    model = timm.models.VisionTransformer(
        img_size=16, patch_size=8, num_classes=3, embed_dim=WIDTH, depth=DEPTH, num_heads=2
    )
    images = torch.randn(2, 3, 16, 16)
    modules = _recorded(model, images)  # the user's line: this one
    # WHEN the unrolled loop is analyzed
    finding = _finding(modules, "/nowhere/vision_transformer.py", Path(__file__).parent)
    # THEN it sits at the user's call, says the loop is timm's (file and line), never "None"
    assert finding.location.file == __file__
    assert "None" not in finding.title and " at None" not in finding.suggestion
    assert "inside timm" in finding.title and "is timm's, not yours" in finding.suggestion
    assert finding.evidence["stack_in_library"].startswith(
        "timm: VisionTransformer.forward_features (timm/models/vision_transformer.py:"
    )
    # AND the swap it gives, run as it says on the model object, computes what timm's loop
    # computes, as a loop on the device
    code = _code(finding.suggestion)
    assert code.splitlines()[-1].startswith("model.blocks = ScannedStack(model.blocks)")
    device = torch_xla.device()
    reference = model.to(device)
    images = images.to(device)
    before = _run(reference, lambda: reference(images))
    scope: dict[str, Any] = {"model": reference}
    exec(code, scope)
    after = _run(reference, lambda: reference(images))
    renamed = {n.replace("blocks.layers.", "blocks."): g for n, g in after[1].items()}
    _same(before, (after[0], renamed, after[2]))


def test_a_call_scan_cannot_carry_is_refused_in_one_line() -> None:
    # GIVEN layers handed a key-value cache object and a flag, as transformers' decoders are
    class DynamicCache:
        pass

    hidden = torch.ones(2, 4)
    # WHEN the bench's stand-in plans the call THEN it names the argument and why
    with pytest.raises(FixFailed, match=r"cache=DynamicCache.*use_cache=False"):
        carry_plan((hidden,), {"cache": DynamicCache(), "use_cache": True})
    # and a mask, integer positions and a pair of tensors travel: the state, the mask and
    # the pair in the carry, the integer positions as a per-layer buffer
    plan = carry_plan(
        (hidden, torch.ones(4, 4)),
        {"position_ids": torch.arange(4), "pair": (hidden, hidden), "flag": None},
    )
    assert len(plan.carry) == 4 and len(plan.buffers) == 1


def test_no_bench_command_names_a_file_nobody_gave() -> None:
    # GIVEN a pasted report (no script) WHEN a finding offers the bench THEN it says how to
    # make a target and names no train.py
    text = bench_command("cache", None)
    assert "train.py" not in text and "returns (model, example_batch)" in text
    # a script without a factory is named, and told what to add; with one, the command is whole
    assert "FUNCTION" in bench_command("scan", "run.py") and "run.py" in bench_command(
        "scan", "run.py"
    )
    assert bench_command("scan", "run.py", " --layers b", "make") == (
        "xlaprof bench scan run.py:make --layers b"
    )


@pytest.mark.runtime
def test_bench_scan_measures_layers_called_with_a_mask_and_returning_a_tuple(
    tmp_path: Path,
) -> None:
    # GIVEN the real-code decoder whose layers are called `layer(hidden, mask)` and return
    # `(hidden, probs)` (before: exit 19 after 20 s, an internal TypeError)
    result = cli(
        "bench",
        "scan",
        "own_decoder_tuple_layers.py:make",
        "--steps",
        "1",
        "--warmup",
        "1",
        "--out",
        str(tmp_path / "b"),
        "--json",
        cwd=EXAMPLES / "realcode",
        env={"HF_HUB_OFFLINE": "1"},
    )
    # THEN both sides run, agree on every gradient, and the scanned graph is the smaller
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["numerics"]["ok"] and document["numerics"]["gradients_compared"] == 75
    rows = {r["metric"]: r for r in document["comparison"]}
    assert rows["largest graph (ops)"]["after"] < rows["largest graph (ops)"]["before"] / 2
    for row in document["comparison"]:  # a worse figure is called worse, never better
        if row["ratio"] is not None and row["ratio"] > 1.02:
            assert "worse" in row["change"]
    for side in ("before", "after"):
        assert load_run(document[side]["run"]).info.status == "ok"  # both kept as runs
    # and what the scan dropped is said
    assert any("drops the other 1 per-layer output" in note for note in document["notes"])
    # and progress was on stderr, side by side
    assert "xlaprof bench scan: before" in result.stderr
    assert "xlaprof bench scan: scan" in result.stderr and "step 2 of 2 done" in result.stderr


def test_one_finding_per_stack_however_many_graphs_unroll_it(tmp_path: Path) -> None:
    # GIVEN a stack unrolled in two graphs (training and evaluation: blocks of other sizes)
    source = tmp_path / "decoder.py"
    source.write_text(DECODER)
    namespace: dict[str, Any] = {"__name__": "decoder_under_test"}
    exec(compile(DECODER, str(source), "exec"), namespace)
    model = namespace["Decoder"](WIDTH, DEPTH)
    modules = _recorded(model, torch.randn(2, 5, WIDTH), torch.zeros(5, 5))
    graphs = [graph(hlo(DEPTH, 10, str(source), 3)), graph(hlo(DEPTH, 9, str(source), 3), 1)]
    # WHEN they are analyzed THEN the stack is reported once (issue 29: once per graph)
    data = AnalysisInput(graphs=graphs, modules=modules, sources=SourceFiles([tmp_path]))
    findings = unrolled_loop.analyze(data)
    assert len(findings) == 1 and findings[0].location.line == LOOP_LINE
