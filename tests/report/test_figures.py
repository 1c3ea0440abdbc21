"""The figures (``xlaprof.report.figures``): from frames, empty ones included; what was not
captured says so."""

from __future__ import annotations

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
