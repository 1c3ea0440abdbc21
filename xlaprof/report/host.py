"""The host-side sections of an analysis: a capture's host time per step where it has no device
planes (``PartResult.host_activity`` and ``host_view``) and a TORCH_TRACE log's compiles
(``PartResult.torch_compiles`` and ``compile_summary``), for the terminal and the HTML report.
Formatting only: the pipeline computes the tables, the steady steps, the hottest names and the
totals (``xlaprof.tables.host_steps``, ``xlaprof.tables.torch_compiles``), and ``--json``
writes them through ``xlaprof.tables.document.host_json``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from xlaprof.parse.units import NOT_MEASURED, format_seconds, missing

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console

    from xlaprof.model.result import CompileSummary, HostView, PartResult

# (column, header) of the host step table, in the order the host's time is split
_HOST_COLUMNS = (
    ("wall_ms", "wall"),
    ("compile_ms", "compile"),
    ("read_ms", "read"),
    ("wait_ms", "wait"),
    ("aten_ms", "aten"),
    ("python_ms", "python"),
    ("other_ms", "other"),
    ("unrecorded_ms", "no event"),
    ("gap_after_ms", "gap after"),
)
_MAX_HOST_ROWS = 8
_MAX_COMPILE_ROWS = 12
_HOTTEST = (("python", "Python functions"), ("aten", "aten ops"))


def _cell(value: Any) -> str:
    return NOT_MEASURED if missing(value) else f"{float(value):.2f}"


def render_console(console: Console, result: PartResult) -> None:
    activity, view = result.host_activity, result.host_view
    if activity is not None and view is not None and len(activity.steps):
        _host_console(console, activity.steps, view)
    compiles, summary = result.torch_compiles, result.compile_summary
    if compiles is not None and summary is not None and len(compiles):
        _compiles_console(console, compiles, summary)


def _host_console(console: Console, steps: pd.DataFrame, view: HostView) -> None:
    console.print(
        Text(
            "No device planes in this capture: what follows is the host's side of each step "
            f"(steps from {view.source})."
        ),
        style="dim",
    )
    columns = [(k, h) for k, h in _HOST_COLUMNS if k in view.measured]
    unmeasured = [h for k, h in _HOST_COLUMNS if k not in view.measured]
    title = "Host time per step (ms)"
    if unmeasured:
        title += f"; no event of: {', '.join(unmeasured)} (not measured)"
    warmup = steps[steps["step"].isin(view.warmup_steps)]
    rows: list[tuple[str, list[str]]] = []
    for _, row in warmup.iterrows():
        rows.append((str(row["step"]), [_cell(row[key]) for key, _ in columns]))
    for _, row in steps[steps["step"] == view.median_step].head(1).iterrows():
        label = f"{row['step']} (median of {len(view.steady_steps)} steady)"
        rows.append((label, [_cell(row[key]) for key, _ in columns]))
    for _, row in steps[~steps.index.isin(warmup.index)].head(_MAX_HOST_ROWS).iterrows():
        rows.append((str(row["step"]), [_cell(row[key]) for key, _ in columns]))
    _grid(console, title, ["step", *(h for _, h in columns)], rows)
    shown = len(warmup) + _MAX_HOST_ROWS
    if len(steps) > shown:
        console.print(f"({len(steps) - shown} more steps in --json)")
    for kind, label in _HOTTEST:
        names = view.hottest.get(kind)
        if not names:
            continue
        per_step = ", ".join(f"{name} {ms:.2f}" for name, ms in names.items())
        console.print(Text(f"Hottest {label} (mean self ms per steady step): {per_step}"))
    console.print()


def _grid(
    console: Console, title: str, headers: list[str], rows: list[tuple[str, list[str]]]
) -> None:
    """A table when the terminal is wide enough for every cell whole, else a line per row."""
    widths = [
        max(len(headers[i]), *(len(([label, *cells])[i]) for label, cells in rows))
        for i in range(len(headers))
    ]
    if sum(widths) + 2 * len(widths) <= console.width:
        table = Table(title=title, title_justify="left", box=None)
        for index, header in enumerate(headers):
            table.add_column(
                header,
                justify="left" if index == 0 else "right",
                no_wrap=True,
                min_width=widths[index],
            )
        for label, cells in rows:
            table.add_row(label, *cells)
        console.print(table)
        return
    console.print(Text(title))  # too narrow for a table: one line per step, nothing cut
    for label, cells in rows:
        values = ", ".join(f"{h} {v}" for h, v in zip(headers[1:], cells, strict=True))
        console.print(Text(f"  step {label}: {values}"))


def _compiles_console(console: Console, compiles: pd.DataFrame, summary: CompileSummary) -> None:
    first = compiles[compiles["rank"] == summary.rank] if summary.rank is not None else compiles
    caches = (
        f"; cache hits {summary.cache_hits}, misses {_or_dash(summary.cache_misses)}"
        if summary.cache_hits is not None
        else ""
    )
    rank_note = f" (rank {summary.rank} of {summary.ranks} ranks)" if summary.ranks > 1 else ""
    total = NOT_MEASURED if summary.seconds is None else format_seconds(summary.seconds)
    console.print(
        Text(
            f"torch.compile (TORCH_TRACE){rank_note}: {summary.compiles} compiles, "
            f"{summary.recompiles} recompiles, {summary.graph_breaks} graph breaks, {total} "
            f"compiling{caches}"
        )
    )
    table = Table(box=None)
    for header in ("id", "function", "step", "seconds", "why"):
        table.add_column(header, justify="right" if header == "seconds" else "left")
    for _, row in first.head(_MAX_COMPILE_ROWS).iterrows():
        why = row["recompile_reason"] if isinstance(row["recompile_reason"], str) else ""
        if isinstance(row["failed"], str):
            why = f"FAILED ({row['failed']}) " + why
        table.add_row(
            str(row["compile_id"]),
            str(row["function"] or NOT_MEASURED),
            NOT_MEASURED if missing(row["step"]) else str(int(row["step"])),
            NOT_MEASURED if missing(row["seconds"]) else f"{row['seconds']:.3f}",
            why.split("  #")[0][:80],
        )
    console.print(table)
    if summary.failed:
        console.print(
            Text(
                f"{summary.failed} compile(s) failed ({', '.join(summary.failed_kinds)}): "
                "dynamo's reason is in the log (tlparse's failures page shows it)",
                style="red",
            )
        )
    if summary.compiles > _MAX_COMPILE_ROWS:
        console.print(f"({summary.compiles - _MAX_COMPILE_ROWS} more compiles in --json)")
    console.print()


def _or_dash(value: int | None) -> str:
    return NOT_MEASURED if value is None else str(value)


def render_html(result: PartResult) -> str:
    """The host-side sections of the HTML report (tables, every string escaped)."""
    from xlaprof.escape import html_text

    def table(frame: pd.DataFrame, columns: list[str]) -> str:
        head = "".join(f"<th>{html_text(c)}</th>" for c in columns)
        rows = "".join(
            "<tr>"
            + "".join(
                f"<td>{html_text(NOT_MEASURED if missing(v) else _html_cell(v))}</td>"
                for v in (row[c] for c in columns)
            )
            + "</tr>"
            for _, row in frame.iterrows()
        )
        return f'<table class="data"><tr>{head}</tr>{rows}</table>'

    sections = []
    activity, view = result.host_activity, result.host_view
    if activity is not None and view is not None and len(activity.steps):
        columns = ["step", *(k for k, _ in _HOST_COLUMNS if k in view.measured)]
        sections.append(
            "<h2>Host time per step (ms)</h2>"
            f"<p>No device planes in this capture; steps from {html_text(activity.source)}.</p>"
            + table(activity.steps.head(200), columns)
        )
    compiles = result.torch_compiles
    if compiles is not None and len(compiles):
        columns = ["rank", "compile_id", "function", "step", "seconds", "recompile_reason"]
        columns += ["graph_breaks", "cache_hits", "cache_misses", "failed"]
        sections.append(
            "<h2>torch.compile compiles (TORCH_TRACE)</h2>" + table(compiles.head(500), columns)
        )
    return "".join(sections)


def _html_cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)
