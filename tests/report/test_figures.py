"""The figures (``xlaprof.report.figures``): from frames, empty ones included; what was not
captured says so."""

from __future__ import annotations

import pytest
from helpers import sample_run

import xlaprof
from xlaprof.pipeline import analyze_one
from xlaprof.report import figures


def test_not_captured_rather_than_absent() -> None:
    from xlaprof.report import figures

    figure = figures.top_device_ops(None)
    assert "not captured" in figure.layout.annotations[0].text
    import pandas as pd

    steps = pd.DataFrame({"step": [0, 1], "compiles": [1, 0], "compile_s": [0.1, 0.0]})
    compiles = figures.compilations(steps, None)
    assert compiles.layout.yaxis.rangemode == "tozero" == compiles.layout.yaxis2.rangemode


def test_figures_take_frames_and_handle_empty_ones() -> None:
    import pandas as pd

    for make in (figures.step_timeline, figures.top_regions, figures.metric_deltas):
        figure = make(pd.DataFrame())
        assert figure.layout.annotations and not figure.data


def test_the_step_chart_fits_the_steady_steps() -> None:
    # GIVEN a run whose two warm-up steps compiled for about a second each
    analysis = xlaprof.Analysis(sample_run("tracing_bound_tiny_ops"))
    timeline = analysis.timeline()
    steady_top = timeline[timeline["steady"]]["wall_s"].max() * 1e3
    assert timeline["wall_s"].max() * 1e3 > 10 * steady_top
    # WHEN the step chart is drawn
    figure = analysis.plot_timeline()
    # THEN its scale is the steady steps' and each compile step off the scale says its time
    low, high = figure.layout.yaxis.range
    assert low == 0 and steady_top < high < 3 * steady_top
    labels = [a.text for a in figure.layout.annotations]
    off = timeline[timeline["wall_s"] * 1e3 > high]
    assert len(labels) == len(off) > 0
    assert all("(compile)" in label for label in labels)


def test_the_step_chart_stacks_the_step_model_up_to_each_wall() -> None:
    # GIVEN the run `make demo` makes (warm-up and recompiles, a trace window of steps 4-5)
    analysis = xlaprof.Analysis(sample_run("recompile_varying_batch"))
    walls = analysis.timeline().set_index("step")["wall_s"] * 1e3
    # WHEN its step chart is drawn
    figure = analysis.plot_timeline()
    bars = [trace for trace in figure.data if trace.type == "bar"]
    # THEN each step's stacked parts reach its wall time exactly, and nothing is drawn twice
    for index, step in enumerate(bars[0].x):
        stacked = sum(float(bar.y[index]) for bar in bars)
        assert stacked == pytest.approx(walls.loc[step], rel=1e-9), step
    # AND every legend entry has something drawn (a part measured in no step has none)
    assert all(max(bar.y) > 0 for bar in bars)
    assert "unattributed" in {bar.name for bar in bars}
    # AND the steps off the scale are labelled upright, each once (no two overlap)
    labels = figure.layout.annotations
    assert labels and all(a.textangle == -90 for a in labels)
    assert len({a.x for a in labels}) == len(labels)


def test_the_report_has_no_placeholder_panels() -> None:
    # GIVEN a run that recorded no regions
    result, _, _ = analyze_one(sample_run("recompile_varying_batch"))
    names = [name for name, _ in figures.result_figures(result)]
    # THEN no panel is drawn only to say there is nothing to draw
    assert result.table("regions") is not None and result.table("regions").empty
    assert "regions" not in names and result.frame("regions") is None
    assert {"timeline", "device-ops", "device-steps", "metric-deltas"} <= set(names)
    for _, figure in figures.result_figures(result):
        assert figure.data, figure.layout.title.text


def _strings(value: object, key: str = "") -> list[tuple[str, str]]:
    """Every string of a figure's JSON with the key it is under (templates left out: ours)."""
    if key.endswith("template"):
        return []
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, k)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v, key)]
    if hasattr(value, "tolist"):
        return _strings(value.tolist(), key)
    return [(key, value)] if isinstance(value, str) else []


def test_every_label_of_the_step_chart_is_inert_the_off_scale_notes_too() -> None:
    # GIVEN a run whose compile steps are drawn off the scale, the bound of each step named
    # with live markup (a saved --json someone sent carries any text there)
    analysis = xlaprof.Analysis(sample_run("tracing_bound_tiny_ops"))
    timeline = analysis.timeline()
    link = '<a href="https://evil.example">x</a><br>'
    timeline["bound"] = link
    # WHEN the step chart is drawn
    figure = figures.step_timeline(timeline)
    # THEN the off-scale notes name the bound, as text: no string anywhere in the figure
    # holds markup (plotly would make it a live link in the HTML report)
    notes = [a.text for a in figure.layout.annotations]
    assert notes and all("evil.example" in note for note in notes)
    assert not [(k, s) for k, s in _strings(figure.to_plotly_json()) if "<" in s]


def test_a_figure_is_escaped_in_every_property_not_only_those_listed() -> None:
    import plotly.graph_objects as go

    from xlaprof.escape import plotly_figure

    # GIVEN a figure with markup in properties no list names: an annotation, a shape's label,
    # a legend title, a menu button, a hover label, a colorbar title
    live = '<a href="https://evil.example">x</a>'
    figure = go.Figure(go.Heatmap(z=[[1]], colorbar={"title": {"text": live}}, hovertext=[[live]]))
    figure.add_annotation(text=live, x=0, y=0)
    figure.add_shape(type="line", x0=0, x1=1, y0=0, y1=1, label={"text": live})
    figure.update_layout(
        legend={"title": {"text": live}},
        updatemenus=[{"buttons": [{"label": live, "method": "restyle", "args": []}]}],
    )
    # WHEN it is made inert
    inert = plotly_figure(figure)
    # THEN no string of it holds markup, and the text is still there to read
    strings = _strings(inert.to_plotly_json())
    assert not [(k, s) for k, s in strings if "<" in s]
    assert sum("evil.example" in s for _, s in strings) >= 5


def test_a_parts_hover_names_what_was_measured_where_the_part_is_less() -> None:
    # GIVEN a run whose second step compiled while the first step's graph still ran: its
    # compile took longer than the part of the step's time the step model gives it
    import json

    run = next(sample_run("healthy_loop").glob("*/steps.jsonl"))
    rows = {row["step"]: row for row in map(json.loads, run.read_text().splitlines())}
    compiled = rows[1]["compile_s"] * 1e3
    # WHEN the step chart is drawn
    figure = xlaprof.Analysis(sample_run("healthy_loop")).plot_timeline()
    (bar,) = [trace for trace in figure.data if trace.name == "compile"]
    index = list(bar.x).index(1)
    part = float(bar.y[index])
    assert part < compiled - 1.0
    # THEN its hover says both: the part drawn, and the compile time the run recorded (the
    # console's step table shows that one for the step)
    hover = bar.customdata[index]
    assert hover.startswith(f"{part:.2f} ms") and f"{compiled:.2f} ms measured" in hover
