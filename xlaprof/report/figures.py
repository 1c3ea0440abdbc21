"""Plotly figures for notebooks and the HTML report. Each takes DataFrames, returns a figure.

They never show anything themselves (the caller does ``fig.show()`` or embeds it), and they
compute nothing the analysis did not: they present. Names in them come from someone's capture
or run: every figure is returned with its labels inert (``escape.plotly_figure``: an op named
``<a href=...>`` shows as that text, never as a link), here, so that a notebook's
``Analysis.plot_*`` is as safe as the HTML report.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, ParamSpec

from xlaprof import escape

if TYPE_CHECKING:
    from collections.abc import Iterable

    import pandas as pd
    import plotly.graph_objects as go

    from xlaprof.model.result import KeptRows, PartResult

# The step chart's stack: the step model's parts (``tables/story.py``), which add up to each
# step's wall time, the unattributed rest last and grey (shown, never a cause).
STEP_PARTS = (
    ("part_compile_s", "compile", "#E45756"),
    ("part_transfer_s", "transfers", "#F58518"),
    ("part_tracing_s", "Python + tracing", "#4C78A8"),
    ("part_device_s", "device work", "#B279A2"),
    ("part_cpu_wait_s", "waiting for a CPU", "#9D9D9D"),
    ("part_unattributed_s", "unattributed", "#D0D0D0"),
)
# What each part was measured as in its step (the timeline's columns, added up): a part is the
# share of the step's time the step model gives it, less than what was measured where the
# work overlapped other parts (a compile under the previous step's device work), so a hover
# that shows the part alone would contradict the console's step table for the same step.
PART_MEASURED = {
    "part_compile_s": ("compile_s",),
    "part_transfer_s": ("transfer_s",),
    "part_tracing_s": ("python_tracing_s", "graph_build_s"),
    "part_device_s": ("device_busy_s",),
    "part_cpu_wait_s": ("cpu_wait_s",),
}


_Args = ParamSpec("_Args")


def _inert(make: Callable[_Args, go.Figure]) -> Callable[_Args, go.Figure]:
    """``make``, its figure returned with every label from data inert."""

    @functools.wraps(make)
    def made(*args: _Args.args, **kwargs: _Args.kwargs) -> go.Figure:
        figure: go.Figure = escape.plotly_figure(make(*args, **kwargs))
        return figure

    return made


# Said when there is no trace at all, rather than implying the trace showed nothing.
NOT_CAPTURED = "not captured: no trace was taken (xlaprof run --trace-steps A:B)"


def _say_kept(figure: go.Figure, kept: KeptRows | None, what: str) -> None:
    """Say under the title that ``figure`` draws only the rows the result kept of a long
    run's table (``kept``: ``tables.bounded`` chose them), and how they were chosen."""
    if kept is None:
        return
    import textwrap

    chosen = textwrap.wrap(f"chosen: {kept.chosen}", 110, break_on_hyphens=False)
    lines = [f"downsampled: {kept.kept:,} of {kept.total:,} {what} drawn", *chosen]
    # One annotation a line: every string of a figure is escaped (the chosen text may come
    # from a saved --json someone sent), so no line break can be written as markup.
    for at, line in enumerate(lines):
        figure.add_annotation(
            xref="paper",
            yref="paper",
            x=0,
            y=1.0,
            yshift=16 * (len(lines) - 1 - at),
            xanchor="left",
            yanchor="bottom",
            align="left",
            showarrow=False,
            font={"size": 11},
            text=line,
        )
    figure.update_layout(margin={"t": 80 + 16 * len(lines)})


def _empty(title: str, message: str) -> go.Figure:
    import plotly.graph_objects as go

    figure = go.Figure()
    figure.update_layout(title=title, xaxis={"visible": False}, yaxis={"visible": False})
    figure.add_annotation(text=message, showarrow=False, font={"size": 14})
    return figure


@_inert
def step_timeline(timeline: pd.DataFrame | None, kept: KeptRows | None = None) -> go.Figure:
    """Each step's time in the run, stacked by the step model's parts (ms), which add up to
    it; the step's time as markers on top, with the device's busy time and the host's time
    from sync to sync in its hover (the host runs ahead of the device, so the two differ). A
    part measured in no step has no bar and no legend entry. ``kept``: the timeline is the rows
    the result kept of a long run's (``PartResult.rows_kept``), which the figure says."""
    import plotly.graph_objects as go

    title = "Step timeline: where each step's time went"
    if timeline is None or timeline.empty:
        return _empty(title, "no per-step data")
    figure = go.Figure()
    steps = timeline["step"].astype(int)
    for column, label, color in STEP_PARTS:
        if column not in timeline:  # a document saved before the part was measured
            continue
        values = timeline[column] * 1e3
        if not (values.fillna(0.0) > 0).any():
            continue
        # a part not measured in a step draws no bar there (plotly would restart the stack
        # at zero above a missing value), and its hover says so
        shown = _part_hover(timeline, column, values)
        figure.add_bar(
            x=steps,
            y=values.fillna(0.0),
            name=label,
            marker_color=color,
            customdata=shown,
            hovertemplate=f"step %{{x}}<br>{label}: %{{customdata}}<extra></extra>",
        )
    busy = (timeline["device_busy_s"] * 1e3).to_numpy(dtype="float64", na_value=float("nan"))
    host = timeline["host_wall_s"] if "host_wall_s" in timeline else timeline["wall_s"]
    host_ms = (host * 1e3).to_numpy(dtype="float64", na_value=float("nan"))
    figure.add_scatter(
        x=steps,
        y=timeline["wall_s"] * 1e3,
        name="step time",
        mode="markers",
        marker={"color": "black", "symbol": "line-ew-open", "size": 14, "line": {"width": 2}},
        customdata=list(zip(busy.tolist(), host_ms.tolist(), strict=True)),
        hovertemplate=(
            "step %{x}: %{y:.2f} ms<br>device busy %{customdata[0]:.2f} ms"
            "<br>host, sync to sync %{customdata[1]:.2f} ms<extra></extra>"
        ),
    )
    figure.update_layout(
        title=title,
        barmode="stack",
        bargap=0.15,
        xaxis_title="step",
        yaxis_title="ms",
        legend_title="part of the step",
    )
    _scale_to_steady(figure, timeline)
    _say_kept(figure, kept, "steps")
    return figure


def _part_hover(timeline: pd.DataFrame, column: str, values: pd.Series) -> list[str]:
    """Each step's hover text for the part ``column`` (``values``, in ms): the part, and what
    was measured where that differs (``PART_MEASURED``)."""
    measured_columns = [c for c in PART_MEASURED.get(column, ()) if c in timeline]
    measured = (
        timeline[measured_columns].sum(axis=1, min_count=1) * 1e3 if measured_columns else None
    )
    shown = []
    for index, value in enumerate(values):
        if value != value:
            shown.append("not measured")
            continue
        text = f"{value:.2f} ms"
        total = None if measured is None else measured.iloc[index]
        if total is not None and total == total and round(total, 2) != round(value, 2):
            text += f" of the step's time ({total:.2f} ms measured, the rest under other parts)"
        shown.append(text)
    return shown


# Steps longer than this many times the longest steady step are drawn off the chart's scale
# (their bars cut, their wall time written above them), so the steady steps stay readable.
OFF_SCALE_FACTOR = 3.0
# Off-scale steps labelled one by one up to this many; more are said in one note.
OFF_SCALE_LABELS = 12


def _scale_to_steady(figure: go.Figure, timeline: pd.DataFrame) -> None:
    """Fit the y axis to the steady steps (``steady``, from the step model) when warm-up or
    compile steps would flatten them, and label each step drawn off the scale with its wall
    time and its largest part (upright, so neighbours do not overlap), or, past
    ``OFF_SCALE_LABELS`` of them, one note for all."""
    if "steady" not in timeline:
        return
    steady = timeline[timeline["steady"].astype(bool)]["wall_s"].dropna()
    if steady.empty:
        return
    top = float(steady.max()) * 1e3
    walls = timeline["wall_s"] * 1e3
    if not top or walls.max() <= OFF_SCALE_FACTOR * top:
        return
    limit = 1.5 * top
    figure.update_yaxes(range=[0, limit * 1.6])
    bounds: Iterable[object] = timeline["bound"] if "bound" in timeline else [None] * len(walls)
    off = [
        (int(step), bound, wall)
        for step, bound, wall in zip(timeline["step"], bounds, walls, strict=True)
        if wall == wall and wall > limit
    ]
    if len(off) > OFF_SCALE_LABELS:
        longest = max(wall for _, _, wall in off)
        figure.add_annotation(
            xref="paper",
            x=0.5,
            y=limit * 1.45,
            text=f"↑ {len(off)} steps off the scale (up to {longest:,.0f} ms)",
            showarrow=False,
        )
        return
    for step, bound, wall in off:
        label = f"{wall:,.0f} ms" + (f" ({bound})" if isinstance(bound, str) else "")
        figure.add_annotation(
            x=step,
            y=limit * 1.02,
            text=f"↑ {label}",
            showarrow=False,
            textangle=-90,
            yanchor="bottom",
            font={"size": 11},
            bgcolor="rgba(255, 255, 255, 0.85)",
        )


@_inert
def compilations(steps: pd.DataFrame, compiles: pd.DataFrame) -> go.Figure:
    """Compilations per step, one marker per compilation with its cause and source line."""
    import plotly.graph_objects as go

    title = "Compilations over steps"
    if steps is None or steps.empty:
        return _empty(title, "no per-step data")
    figure = go.Figure()
    figure.add_bar(
        x=steps["step"], y=steps["compiles"], name="compilations", marker_color="#E45756"
    )
    figure.add_scatter(
        x=steps["step"],
        y=steps["compile_s"],
        name="compile time (s)",
        yaxis="y2",
        mode="lines+markers",
        line={"color": "#4C78A8"},
    )
    if compiles is not None and not compiles.empty:
        labels = [  # data apart from the layout's <br>: the report makes data labels inert
            [cause or "?", location or "", graph_hash or ""]
            for cause, location, graph_hash in zip(
                compiles["cause"], compiles["location"], compiles["graph_hash"], strict=True
            )
        ]
        figure.add_scatter(
            x=compiles["step"],
            y=[0.5] * len(compiles),
            mode="markers",
            name="compile events",
            marker={"symbol": "x", "size": 10, "color": "black"},
            customdata=labels,
            hovertemplate="step %{x}<br>%{customdata[0]}<br>%{customdata[1]}<br>"
            "graph %{customdata[2]}<extra></extra>",
        )
    figure.update_layout(
        title=title,
        xaxis_title="step",
        # Both axes start at zero (plotly pads a line's axis below its minimum: a -0.099 tick
        # whose zero did not line up with the count axis).
        yaxis={"title": "compilations", "rangemode": "tozero"},
        yaxis2={"title": "seconds", "overlaying": "y", "side": "right", "rangemode": "tozero"},
    )
    return figure


@_inert
def top_regions(regions: pd.DataFrame, limit: int = 15) -> go.Figure:
    """Total host seconds per user region (``xlaprof.region``/``annotate_module``): the
    rows of each call, or each region's total (the pipeline's)."""
    import plotly.graph_objects as go

    title = "Top host regions"
    if regions is None or regions.empty:
        return _empty(title, "no regions recorded (annotate code with xlaprof.region)")
    totals = regions.groupby("name")["seconds"].sum().sort_values(ascending=True).tail(limit)
    figure = go.Figure(go.Bar(x=totals.to_numpy() * 1e3, y=totals.index, orientation="h"))
    figure.update_layout(title=title, xaxis_title="host ms (all steps)", yaxis_title="region")
    return figure


@_inert
def top_device_ops(top: pd.DataFrame | None) -> go.Figure:
    """The result's top device ops (``PartResult.frame("device_ops")``: total time per op
    over all devices, most first, as the pipeline chose them), by category; None: no capture."""
    return top_ops_chart(top)


def top_ops_chart(top: pd.DataFrame | None) -> go.Figure:
    """The top ops (``tables.device.top_ops``' rows, most time first) as horizontal bars."""
    import plotly.graph_objects as go

    title = "Top device ops"
    if top is None:
        return _empty(title, NOT_CAPTURED)
    if top.empty:
        return _empty(title, "no device ops in this trace (a CPU capture without XLA op events)")
    top = top.iloc[::-1]
    figure = go.Figure()
    for category, rows in top.groupby("category", sort=False):
        figure.add_bar(
            x=rows["total_s"] * 1e3,
            y=rows["name"].astype(str).str.slice(0, 60),
            orientation="h",
            name=str(category),
            customdata=rows[["occurrences", "devices"]],
            hovertemplate="%{y}<br>%{x:.3f} ms, %{customdata[0]} times on "
            "%{customdata[1]} device(s)<extra></extra>",
        )
    figure.update_layout(
        title=title,
        xaxis_title="device ms (all devices)",
        yaxis_title="op",
        yaxis={"categoryorder": "array", "categoryarray": list(top["name"].str.slice(0, 60))},
    )
    return figure


@_inert
def device_steps(steps: pd.DataFrame | None, limit: int = 200) -> go.Figure:
    """Busy and idle time of each device's steps (``Trace.device_steps``), device by device."""
    import plotly.graph_objects as go

    title = "Device steps: busy and idle"
    if steps is None:
        return _empty(title, NOT_CAPTURED)
    if steps.empty:
        return _empty(title, "no device steps in this trace")
    figure = go.Figure()
    for device, rows in steps.groupby("device", sort=True):
        rows = rows.head(limit)
        label = rows["step"].astype("string").fillna("capture")
        x = [f"{device} · {s}" for s in label]
        figure.add_bar(x=x, y=rows["busy_s"] * 1e3, name=f"{device} busy")
        figure.add_bar(x=x, y=rows["idle_s"] * 1e3, name=f"{device} idle", opacity=0.4)
    figure.update_layout(
        title=title, barmode="stack", xaxis_title="device · step", yaxis_title="ms"
    )
    return figure


@_inert
def host_step_heatmap(
    host_steps: pd.DataFrame | None,
    stragglers: pd.DataFrame | None = None,
    kept: KeptRows | None = None,
) -> go.Figure:
    """Host × step heat map of step time relative to the step's median host.

    Colour is wall time / the step's median (1 = a typical host), so a straggler stands out
    whatever each step's length; hovering shows the milliseconds. Each step's slowest host is
    outlined. With device rows, the first device's steps are shown (host rows otherwise).
    ``kept``: ``host_steps`` is the rows the result kept of a long run's (``PartResult.rows_kept``),
    which the figure says.
    """
    import plotly.graph_objects as go

    title = "Step time per host, relative to the step's median host"
    if host_steps is None or host_steps.empty or host_steps["host"].nunique() < 2:
        return _empty(title, "one host only: no stragglers to compare")
    devices = sorted(host_steps["device"].unique(), key=lambda d: (d == "host", str(d)))
    device = devices[-1] if "host" in devices else devices[0]
    rows = host_steps[host_steps["device"] == device]
    grid = rows.pivot_table(index="host", columns="step", values="wall_ms", aggfunc="max")
    relative = grid / grid.median(axis=0)
    figure = go.Figure(
        go.Heatmap(
            z=relative.to_numpy(),
            x=[str(s) for s in grid.columns],
            y=[str(h) for h in grid.index],
            customdata=grid.to_numpy(),
            colorscale="Viridis",
            colorbar={"title": "× median"},
            hovertemplate="host %{y}<br>step %{x}<br>%{customdata:.2f} ms "
            "(%{z:.2f}× the median host)<extra></extra>",
        )
    )
    if stragglers is not None and not stragglers.empty:
        mine = stragglers[(stragglers["device"] == device) & stragglers["slowest_host"].notna()]
        mine = mine[mine["step"].isin(grid.columns)]  # the steps drawn (a long run's: some)
        figure.add_scatter(
            x=[str(s) for s in mine["step"]],
            y=mine["slowest_host"].astype(str),
            mode="markers",
            marker={"symbol": "square-open", "size": 14, "color": "red"},
            name="slowest host",
            text=mine["waiting_on"],
            hovertemplate="step %{x}: %{y} slowest (%{text})<extra></extra>",
        )
    height = min(300 + 12 * grid.shape[0], 2400)
    figure.update_layout(
        title=f"{title} ({device})", xaxis_title="step", yaxis_title="host", height=height
    )
    _say_kept(figure, kept, "host steps")
    return figure


@_inert
def metric_deltas(
    steps: pd.DataFrame,
    columns: tuple[str, ...] = (
        "compiles",
        "executions",
        "transfers_to_device",
        "transfers_from_device",
    ),
) -> go.Figure:
    """Per-step metric deltas, one line each."""
    import plotly.graph_objects as go

    title = "Metric deltas per step"
    if steps is None or steps.empty:
        return _empty(title, "no per-step data")
    figure = go.Figure()
    for column in columns:
        if column in steps:
            figure.add_scatter(x=steps["step"], y=steps[column], name=column, mode="lines+markers")
    figure.update_layout(title=title, xaxis_title="step", yaxis_title="count in step")
    return figure


@_inert
def before_after(comparison: pd.DataFrame) -> go.Figure:
    """Before/after ratios of two runs (``analyze.compare.compare``): below 1 is better."""
    import plotly.graph_objects as go

    title = "After / before (lower is better; 1 = unchanged)"
    rows = comparison.dropna(subset=["ratio"]) if comparison is not None else None
    if rows is None or rows.empty:
        return _empty(title, "nothing measured in both runs")
    colors = ["#54A24B" if r < 1 else "#E45756" for r in rows["ratio"]]
    figure = go.Figure(
        go.Bar(
            x=rows["ratio"],
            y=rows["metric"],
            orientation="h",
            marker_color=colors,
            text=rows["change"],
            hovertemplate="%{y}: %{x:.2f}x<br>%{text}<extra></extra>",
        )
    )
    figure.add_vline(x=1, line_dash="dash")
    figure.update_layout(title=title, xaxis_title="after / before")
    return figure


# -- one analysis result's figures (the notebook facade's plot_* and the HTML report) ---------


def result_figures(result: PartResult) -> list[tuple[str, go.Figure]]:
    """Every figure of ``result`` that has something to draw, by name, in the HTML report's
    order, from the tables the pipeline made (``PartResult.frames``): no placeholder panels
    (regions only where some were recorded, device figures only where a trace has device ops
    or steps, the per-host heat map only for several hosts)."""
    import pandas as pd

    def frame(name: str) -> pd.DataFrame:
        found = result.frame(name)
        return pd.DataFrame() if found is None else found

    def kept(table: pd.DataFrame | None) -> pd.DataFrame:  # the rows the result kept
        return pd.DataFrame() if table is None else table

    figures = [
        ("timeline", step_timeline(kept(result.timeline), result.rows_kept.get("timeline"))),
        ("compilations", compilations(frame("steps"), frame("compiles"))),
    ]
    if not frame("regions").empty:
        figures.append(("regions", top_regions(frame("regions"))))
    if result.devices is not None:  # a trace
        if not frame("device_ops").empty:
            figures.append(("device-ops", top_ops_chart(frame("device_ops"))))
        if not frame("device_steps").empty:
            figures.append(("device-steps", device_steps(frame("device_steps"))))
    host_steps = frame("host_steps")
    if not host_steps.empty:
        cut = result.rows_kept.get("frame:host_steps")
        figures.append(("host-steps", host_step_heatmap(host_steps, kept(result.stragglers), cut)))
    if not frame("steps").empty:
        figures.append(("metric-deltas", metric_deltas(frame("steps"))))
    return figures
