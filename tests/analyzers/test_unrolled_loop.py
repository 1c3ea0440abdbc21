"""Unrolled loops (``xlaprof.analyzers.unrolled_loop``) on hand-built HLO: identical blocks
found, named from the user's source or from the run's module tree (no runtime needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from builders import TRAINING_SOURCE, graph, hlo
from helpers import SAMPLES

from xlaprof.analyzers import unrolled_loop
from xlaprof.analyzers.shared.sourcecode import time_loop_sketch
from xlaprof.analyzers.unrolled_loop import find_repeats
from xlaprof.findings import Finding, Kind, Location
from xlaprof.model.input import AnalysisInput
from xlaprof.model.sources import SourceFiles
from xlaprof.pipeline import analyze_one

MODEL = """\
import torch
from torch import nn


class Layer(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Layer() for _ in range(24)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
"""
LAYER_LINE = MODEL.splitlines().index("        return torch.tanh(x) * 2") + 1
LOOP_LINE = MODEL.splitlines().index("        for layer in self.layers:") + 1


def test_find_repeats_counts_blocks() -> None:
    tokens = ["a", "b"] + [f"op{i}" for i in range(10)] * 24 + ["z"]
    (run, *_rest) = find_repeats(tokens)
    assert (run.block_ops, run.repeats) == (10, 24)  # the smallest period, all copies


# 3 copies of a 10-op block (few), 24 copies of a 3-op block (tiny); the generator cycles
# through 10 opcodes, so blocks must stay within 10 ops to be what they say.
@pytest.mark.parametrize(("blocks", "block_ops"), [(3, 10), (24, 3)])
def test_no_finding_when_repeats_are_few_or_tiny(
    tmp_path: Path, blocks: int, block_ops: int
) -> None:
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    data = AnalysisInput(graphs=[graph(hlo(blocks, block_ops, str(model), LAYER_LINE))])
    assert unrolled_loop.analyze(data) == []


def test_layer_stack_is_named_with_its_loop(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    data = AnalysisInput(graphs=[graph(hlo(24, 10, str(model), LAYER_LINE))])
    data.sources = SourceFiles([tmp_path])  # read only under a source root (issue 16)
    (finding,) = unrolled_loop.analyze(data)
    assert finding.kind == Kind.UNROLLED_LOOP
    assert finding.location == Location(str(model), LOOP_LINE)
    assert finding.evidence["repeats"] == 24 and finding.evidence["ops_per_block"] == 10
    assert finding.evidence["layer_class"] == "Layer"
    assert "self.layers of Net (nn.ModuleList of Layer" in finding.evidence["layer_stack"]
    assert "scan_layers(self.layers, x)" in finding.suggestion
    assert "is_layer_pure=True" in finding.suggestion and "homogeneous" in finding.suggestion


def test_without_source_files_the_block_line_is_kept(tmp_path: Path) -> None:
    missing = str(tmp_path / "gone.py")  # analyzed on another machine
    (finding,) = unrolled_loop.analyze(AnalysisInput(graphs=[graph(hlo(24, 10, missing, 7))]))
    assert finding.location == Location(missing, 7) and "layer_stack" not in finding.evidence
    assert "scan_layers" in finding.suggestion and "scan(fn, init, xs)" in finding.suggestion


def _stack(children: list[tuple[str, str]]) -> dict[str, object]:
    """The module tree's record of one container (capture/modules.py) holding ``children``."""
    kind = "Sequential" if children[0][0] == "Linear" else "ModuleList"
    return {"class": kind, "children": [{"class": c, "params": p} for c, p in children]}


def _module_finding(
    repeats: int, modules: dict[str, object], sources: SourceFiles | None = None
) -> list[Finding]:
    """The findings for a graph of ``repeats`` identical 8-op blocks (no source lines of its
    own, so only the module tree can name it) and the run's module tree ``modules``."""
    data = AnalysisInput(graphs=[graph(hlo(repeats, 8))], modules=modules)
    data.sources = sources or SourceFiles()
    return unrolled_loop.analyze(data)


def test_stack_units_from_the_module_tree() -> None:
    linear, gelu, head = ("Linear", "64x64;64"), ("GELU", ""), ("Linear", "1x64;1")
    # a Sequential of 16 (Linear, GELU) and a head: 16 units of period 2 from child 0
    stack = _stack([linear, gelu] * 16 + [head])
    (finding,) = _module_finding(16, {"stacks": [stack], "repeated": []})
    assert finding.evidence["layer_stack"] == "the model (nn.Sequential of (Linear, GELU) x 16)"
    # an embedding, 12 blocks, a head: 12 units of period 1 from child 1
    stack = _stack([("Embedding", "9x4"), *[("Block", "4x4")] * 12, head])
    (finding,) = _module_finding(12, {"stacks": [stack], "repeated": []})
    assert finding.evidence["layer_stack"] == "the model (nn.ModuleList of Block x 12)"
    assert finding.evidence["layer_class"] == "Block"
    # nothing repeats: no unit of the stack is the repeated block
    stack = _stack([linear, ("ReLU", ""), head])
    assert _module_finding(4, {"stacks": [stack], "repeated": []}) == []


def test_a_module_called_n_times_is_a_time_loop(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text(TRAINING_SOURCE)
    modules = {
        "stacks": [],
        "repeated": [
            {
                "name": "cell",
                "class": "GRUCell",
                "file": "/x/torch/nn/modules/rnn.py",
                "calls": 24,
                "sites": [{"where": f"{path}:17", "direct": True}],
            }
        ],
    }
    sources = SourceFiles([tmp_path])  # read only under a source root (issue 16)
    (finding,) = _module_finding(23, modules, sources)
    sketch = time_loop_sketch(sources, str(path), 17)
    # the module called 24 times a step is the 23 repeats' time loop, at the loop around its
    # call (line 16), with a scan sketched from that call (line 17)
    assert finding.evidence["repeated_module"] == "cell (GRUCell), called 24 times a step"
    assert finding.location == Location(str(path), 16)
    assert finding.evidence["loop"] == f"{path}:16"
    assert sketch is not None and finding.evidence["scan_sketch"] == sketch
    # a repeat count far from the call count is not this loop
    assert _module_finding(12, modules, sources) == []


def test_the_titles_share_is_of_the_blocks_it_names() -> None:
    # GIVEN the sample run of examples/unrolled_layers.py, whose stack unrolls as a run of one
    # block and a run of another beside it (the layers' backward)
    result = analyze_one(SAMPLES / "runs" / "unrolled_layers")[0]
    (finding,) = [f for f in result.findings if f.kind is Kind.UNROLLED_LOOP]
    evidence = finding.evidence
    assert evidence["other_runs"], "the sample's stack has a second run"
    # WHEN its title is read THEN it names every run the share counts, and the share is theirs
    runs = [
        (int(n), int(ops))
        for n, ops in re.findall(r"(\d+) (?:identical copies )?of a (\d+)-op", finding.title)
    ]
    assert runs[0] == (evidence["repeats"], evidence["ops_per_block"])
    assert [f"{n} x {ops} ops" for n, ops in runs[1:]] == evidence["other_runs"]
    (percent,) = re.findall(r"\((\d+)% of the graph\)", finding.title)
    covered = sum(n * ops for n, ops in runs)
    assert int(percent) == round(100 * covered / evidence["graph_ops"])


def test_the_fix_counts_the_stacks_layers_not_the_identical_copies() -> None:
    # GIVEN a stack of 24 blocks whose graph shows 22 identical copies (the first and last
    # block's ops differ from the others', as the input's and the head's do)
    layers = 24
    stack = _stack([("Embedding", "9x4"), *[("Block", "4x4")] * layers, ("Linear", "1x4;1")])
    (finding,) = _module_finding(layers - 2, {"stacks": [stack], "repeated": []})
    # WHEN the fix says what scanning saves THEN it is one layer compiled instead of the
    # stack's 24, the number its title names
    assert f"x {layers})" in finding.title
    assert f"compiles one layer instead of {layers}." in (finding.suggestion or "")
