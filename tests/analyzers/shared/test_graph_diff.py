"""What changed between the graphs a site compiled (``xlaprof.analyzers.shared.graph_diff``),
on hand-built HLO: an input's shape, a data-dependent shape, the structure, or nothing visible."""

from __future__ import annotations

from builders import graph, hlo

from xlaprof.analyzers.shared.graph_diff import data_dependent_op, explain
from xlaprof.findings import Location
from xlaprof.model.input import GraphInfo
from xlaprof.parse.hlo import parse_hlo


def test_shape_change_is_named() -> None:
    graphs = [
        graph(hlo(1, 2, "/u/train.py", 5, shape=f"f32[{n},16]", params=[f"f32[{n},16]"]), i)
        for i, n in enumerate((16, 11, 7))
    ]
    result = explain(graphs, {})
    assert result.kind == "input_shapes"
    (change,) = result.inputs
    assert change.varying_dims == {0: [16, 11, 7]} and str(change.source) == "/u/train.py:3"
    # the values in order, and no guess at what the dimension is
    assert "dim 0 takes 16 → 11 → 7" in result.summary and "batch" not in result.summary


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


def module(body: list[str]) -> GraphInfo:
    """A one-computation HLO module from instruction lines (``%name = shape op(...), ...``)."""
    text = "\n".join(["HloModule m", "", "ENTRY %m () -> f32[] {", *body, "}"])
    return GraphInfo(order=0, step=0, module="m", hlo=parse_hlo(text))


def _meta(file: str, line: int, op: str = "aten__mul") -> str:
    return f'metadata={{op_type="{op}" source_file="{file}" source_line={line}}}'


DATA = _meta("/u/t.py", 3, "xla__device_data")
ADAM = "/lib/site-packages/torch/optim/adam.py"


def test_attributes_are_parsed_without_metadata_or_serial_numbers() -> None:
    # GIVEN HLO lines with slice bounds, a reduce calling a numbered computation and metadata
    graph = module(
        [
            f"  %p0 = f32[80,20]{{1,0}} parameter(0), {DATA}",
            f"  %s = f32[10,20]{{1,0}} slice(%p0), slice={{[10:20], [0:20]}}, {_meta('/u', 4)}",
            "  %c = f32[] constant(0.5)",
            "  ROOT %r = f32[] reduce(%s, %c), dimensions={0,1}, to_apply=%AddComputation.73",
        ]
    )
    # WHEN it is parsed THEN each op keeps what it computes, not where it came from
    ops = {i.name: i for i in graph.hlo.instructions}
    assert ops["s"].attributes == "slice={[10:20], [0:20]}"
    assert ops["r"].attributes == "dimensions={0,1}, to_apply=%AddComputation"
    assert ops["c"].literal == "0.5" and ops["c"].attributes is None


def test_slice_bounds_baked_in_are_named_at_their_line() -> None:
    # GIVEN two graphs of one site that differ only in a slice's bounds
    def graph(start: int, order: int) -> GraphInfo:
        found = module(
            [
                f"  %p0 = f32[80,20]{{1,0}} parameter(0), {DATA}",
                f"  ROOT %s = f32[10,20]{{1,0}} slice(%p0), "
                f"slice={{[{start}:{start + 10}], [0:20]}}, {_meta('/u/t.py', 44, 'xla__select')}",
            ]
        )
        found.order = found.step = order
        return found

    # WHEN what changed is explained THEN the bounds are named, in order, at the slicing line
    result = explain([graph(0, 0), graph(10, 1), graph(20, 2)], {})
    assert result.kind == "attribute"
    assert result.first_difference["location"] == "/u/t.py:44"
    assert "[0:10]" in result.summary and "[20:30]" in result.summary


def test_a_graph_input_baked_into_a_constant_is_named_with_its_line() -> None:
    # GIVEN a graph that multiplies by a scalar graph input, and the same graph where that
    # scalar became the constant 1 (torch_xla bakes a Python 1.0 in), used twice
    before = module(
        [
            f"  %p0 = f32[4]{{0}} parameter(0), {_meta('/u/t.py', 2, 'xla__device_data')}",
            f"  %p1 = f32[] parameter(1), {_meta(ADAM, 411, 'xla__device_data')}",
            f"  %b = f32[4]{{0}} broadcast(%p1), dimensions={{}}, {_meta('/u/t.py', 7)}",
            f"  ROOT %m = f32[4]{{0}} multiply(%p0, %b), {_meta('/u/t.py', 7)}",
        ]
    )
    after = module(
        [
            f"  %p0 = f32[4]{{0}} parameter(0), {_meta('/u/t.py', 2, 'xla__device_data')}",
            "  %c = f32[] constant(1)",
            f"  %b = f32[4]{{0}} broadcast(%c), dimensions={{}}, {_meta('/u/t.py', 7)}",
            "  %c2 = f32[] constant(1)",
            f"  ROOT %m = f32[4]{{0}} multiply(%p0, %b), {_meta('/u/t.py', 7)}",
        ]
    )
    after.order = after.step = 1
    # WHEN the late graph is explained THEN it says which input was baked in, as what, where
    result = explain([before, after], {})
    assert result.kind == "baked_value"
    change = result.changes[0]
    assert (change.before, change.after, change.count) == ("f32[]", "1", 2)
    assert str(change.op_source) == f"{ADAM}:411"


def test_one_argument_where_is_data_dependent_and_two_argument_where_is_not() -> None:
    # GIVEN source lines as transformers' experts loop and a masking step write them
    # WHEN their text is read THEN only the one-argument form has a data-dependent shape
    assert data_dependent_op("token_idx, _ = torch.where(expert_mask[expert_idx])") == "nonzero"
    assert data_dependent_op("x = torch.where(mask, x, 0)") is None
    assert data_dependent_op("idx = mask.nonzero()") == "nonzero"
    assert data_dependent_op("kept = torch.masked_select(x, mask)") == "masked_select"


def _counted(count: int, order: int) -> GraphInfo:
    """A graph of a line that selects ``count`` rows: two uses of the count as a constant and
    two ops shaped by it, of two element types (a data-dependent count, as ``nonzero`` gives)."""
    line = _meta("/u/t.py", 21, "aten__sum")
    where = _meta("/u/t.py", 21, "aten__lt")
    found = module(
        [
            f"  %p0 = f32[64]{{0}} parameter(0), {DATA}",
            f"  %c0 = f32[] constant({count}), {line}",
            f"  %c1 = f32[] constant({count}), {line}",
            f"  %a = s64[{count}]{{0}} iota(), iota_dimension=0, {where}",
            f"  %b = pred[{count}]{{0}} iota(), iota_dimension=0, {where}",
            "  ROOT %r = f32[] add(%c0, %c1)",
        ]
    )
    found.order = found.step = order
    return found


def test_values_that_change_are_listed_graph_by_graph() -> None:
    # GIVEN a site's graphs, each with its own count, used twice as a constant and shaping an
    # s64 and a pred op at one line
    counts = (30, 35, 34, 41)
    graphs = [_counted(n, order) for order, n in enumerate(counts)]
    # WHEN what changed is explained
    result = explain(graphs, {})
    # THEN each change lists the graphs' values once each, in compile order: not the several
    # uses of one graph in turn (30 → 35 → 30 → 35 → 34 …), nor another op's type in between
    by_kind = {change.kind: change for change in result.changes}
    constant, sizes = by_kind["constant"], by_kind["sizes"]
    assert [constant.before, *constant.after.split(" → ")] == [str(n) for n in counts]
    assert constant.count == 2 * (len(counts) - 1)
    assert [sizes.before, *sizes.after.split(" → ")] == [f"s64[{n}]" for n in counts]
