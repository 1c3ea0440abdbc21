"""Unrolled-loop detection and recompilation diffs on hand-built HLO (no runtime needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlaprof.analyzers import unrolled_loop
from xlaprof.analyzers.shared.graph_diff import explain
from xlaprof.analyzers.unrolled_loop import find_repeats
from xlaprof.findings import Kind, Location
from xlaprof.model.input import AnalysisInput, GraphInfo
from xlaprof.parse.hlo import parse_hlo

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


def hlo(
    blocks: int,
    block_ops: int,
    file: str = "",
    line: int = 0,
    shape: str = "f32[8,16]",
    params: list[str] | None = None,
) -> str:
    """An HLO module: parameters, then ``blocks`` copies of a ``block_ops``-op block."""
    meta = (
        f', metadata={{op_type="aten__tanh" source_file="{file}" source_line={line}}}'
        if file
        else ""
    )
    lines = [
        f"HloModule m, entry_computation_layout={{()->{shape}}}",
        "",
        "ENTRY %m (p0: f32[8,16]) -> f32[8,16] {",
    ]
    for number, param in enumerate(params or [shape]):
        meta_p = f'metadata={{op_type="xla__device_data" source_file="{file}" source_line=3}}'
        lines.append(f"  %p{number} = {param}{{1,0}} parameter({number}), {meta_p}")
    previous = "p0"
    opcodes = [
        "tanh",
        "multiply",
        "add",
        "exponential",
        "negate",
        "log",
        "sqrt",
        "abs",
        "sine",
        "cosine",
    ]
    count = 0
    for _ in range(blocks):
        for op in range(block_ops):
            name = f"i{count}"
            lines.append(
                f"  %{name} = {shape}{{1,0}} {opcodes[op % len(opcodes)]}(%{previous}){meta}"
            )
            previous, count = name, count + 1
    lines.append("}")
    return "\n".join(lines)


def graph(text: str, order: int = 0) -> GraphInfo:
    return GraphInfo(order=order, step=order, module=f"m{order}", hlo=parse_hlo(text))


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
    from xlaprof.inputs.sourcefiles import source_roots

    model = tmp_path / "model.py"
    model.write_text(MODEL)
    data = AnalysisInput(graphs=[graph(hlo(24, 10, str(model), LAYER_LINE))])
    with source_roots(tmp_path):  # sources are read only under a source root (issue 16)
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


def test_shape_change_is_named() -> None:
    graphs = [
        graph(hlo(1, 2, "/u/train.py", 5, shape=f"f32[{n},16]", params=[f"f32[{n},16]"]), i)
        for i, n in enumerate((16, 11, 7))
    ]
    result = explain(graphs, {})
    assert result.kind == "input_shapes"
    (change,) = result.inputs
    assert change.varying_dims == {0: [16, 11, 7]} and str(change.source) == "/u/train.py:3"
    assert "dim 0 varies (16, 11, 7) (likely the batch size)" in result.summary


def test_data_dependent_shape_is_recognized() -> None:
    graphs = [
        graph(hlo(1, 2, "/u/train.py", 5, shape=f"f32[{n},16]", params=[f"f32[{n},16]"]), i)
        for i, n in enumerate((30, 35))
    ]
    result = explain(graphs, {Location("/u/train.py", 3): "nonzero"})
    assert result.kind == "data_dependent" and result.inputs[0].data_dependent == "nonzero"


def test_structure_change_names_the_first_differing_op() -> None:
    result = explain([graph(hlo(1, 4, "/u/a.py", 9), 0), graph(hlo(1, 5, "/u/a.py", 9), 1)], {})
    assert result.kind == "structure"
    assert result.first_difference["location"] == "/u/a.py:9"


def test_identical_graphs_are_not_guessed_about() -> None:
    result = explain([graph(hlo(1, 4, "/u/a.py", 9), 0), graph(hlo(1, 4, "/u/a.py", 9), 1)], {})
    assert result.kind == "nothing_visible" and "does not show" not in result.summary
    assert "reason the graphs do not show" in result.summary
