"""What changed between the graphs a site compiled (``xlaprof.analyzers.shared.graph_diff``),
on hand-built HLO: an input's shape, a data-dependent shape, the structure, or nothing visible."""

from __future__ import annotations

from builders import graph, hlo

from xlaprof.analyzers.shared.graph_diff import explain
from xlaprof.findings import Location


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
