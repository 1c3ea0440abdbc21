"""The host-side sections of an analysis: a capture's host time per step where it has no device
planes (``PartResult.host_activity``) and a TORCH_TRACE log's compiles
(``PartResult.torch_compiles``), for the terminal and for ``--json``. Formatting only: the
tables are computed in ``xlaprof.tables.host_steps`` and ``xlaprof.tables.torch_compiles``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from xlaprof.parse.units import NOT_MEASURED, format_seconds, missing

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console

    from xlaprof.model.input import HostActivity
    from xlaprof.model.result import PartResult

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
_MAX_HOT = 5
_MAX_COMPILE_ROWS = 12
MAX_JSON_ROWS = 10_000


def _cell(value: Any) -> str:
    return NOT_MEASURED if missing(value) else f"{float(value):.2f}"


def steady(result: PartResult, activity: HostActivity) -> tuple[pd.DataFrame, int | None]:
    """The steady steps' host rows and the median step, as the step model counts them (the
    timeline's steady steps and its step of median wall time: the story's), so the tables agree."""
    from xlaprof.tables.timeline import steady_median

    steps = activity.steps
    warmup = result.part.data.warmup_steps
    timeline = result.timeline
    if timeline is None or timeline.empty:
        kept = steps[steps["step"] >= warmup]
        return kept, None
    chosen = timeline[timeline["step"] >= warmup]
    if "steady" in chosen:
        chosen = chosen[chosen["steady"].astype(bool)]
    median, count = steady_median(timeline, warmup)
    return steps[steps["step"].isin(chosen["step"])], int(median["step"]) if count else None


def render_console(console: Console, result: PartResult) -> None:
    activity = result.host_activity
    if activity is not None and len(activity.steps):
        _host_console(console, result, activity)
    compiles = result.torch_compiles
    if compiles is not None and len(compiles):
        _compiles_console(console, compiles)


def _host_console(console: Console, result: PartResult, activity: HostActivity) -> None:
    console.print(
        Text(
            "No device planes in this capture: what follows is the host's side of each step "
            f"(steps from {activity.source})."
        ),
        style="dim",
    )
    steps = activity.steps
    columns = [(k, h) for k, h in _HOST_COLUMNS if steps[k].notna().any()]
    unmeasured = [h for k, h in _HOST_COLUMNS if (k, h) not in columns]
    title = "Host time per step (ms)"
    if unmeasured:
        title += f"; no event of: {', '.join(unmeasured)} (not measured)"
    rest, median = steady(result, activity)
    warmup = steps[steps["step"] < result.part.data.warmup_steps]
    rows: list[tuple[str, list[str]]] = []
    for _, row in warmup.iterrows():
        rows.append((str(row["step"]), [_cell(row[key]) for key, _ in columns]))
    for _, row in steps[steps["step"] == median].head(1).iterrows():
        label = f"{row['step']} (median of {len(rest)} steady)"
        rows.append((label, [_cell(row[key]) for key, _ in columns]))
    for _, row in steps[~steps.index.isin(warmup.index)].head(_MAX_HOST_ROWS).iterrows():
        rows.append((str(row["step"]), [_cell(row[key]) for key, _ in columns]))
    _grid(console, title, ["step", *(h for _, h in columns)], rows)
    shown = len(warmup) + _MAX_HOST_ROWS
    if len(steps) > shown:
        console.print(f"({len(steps) - shown} more steps in --json)")
    hot = activity.hot
    hot = hot[hot["step"].isin(rest["step"])]
    for kind, label in (("python", "Python functions"), ("aten", "aten ops")):
        mine = hot[hot["kind"] == kind]
        if mine.empty:
            continue
        totals = mine.groupby("name")["self_ms"].sum().sort_values(ascending=False).head(_MAX_HOT)
        per_step = ", ".join(f"{name} {total / len(rest):.2f}" for name, total in totals.items())
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


def _compiles_console(console: Console, compiles: pd.DataFrame) -> None:
    ranks = compiles["rank"].dropna().unique()
    first = compiles[compiles["rank"] == ranks.min()] if len(ranks) else compiles
    seconds = first["seconds"].dropna()
    hits = first["cache_hits"].dropna()
    misses = first["cache_misses"].dropna()
    caches = f"; cache hits {int(hits.sum())}, misses {int(misses.sum())}" if len(hits) else ""
    rank_note = f" (rank {int(ranks.min())} of {len(ranks)} ranks)" if len(ranks) > 1 else ""
    total = format_seconds(float(seconds.sum())) if len(seconds) else NOT_MEASURED
    recompiles = int(first["recompile_reason"].notna().sum())
    console.print(
        Text(
            f"torch.compile (TORCH_TRACE){rank_note}: {len(first)} compiles, {recompiles} "
            f"recompiles, {int(first['graph_breaks'].sum())} graph breaks, {total} compiling"
            f"{caches}"
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
    failed = first[first["failed"].notna()]
    if len(failed):
        console.print(
            Text(
                f"{len(failed)} compile(s) failed ({', '.join(sorted(set(failed['failed'])))}): "
                "dynamo's reason is in the log (tlparse's failures page shows it)",
                style="red",
            )
        )
    if len(first) > _MAX_COMPILE_ROWS:
        console.print(f"({len(first) - _MAX_COMPILE_ROWS} more compiles in --json)")
    console.print()


def json_sections(result: PartResult, records: Any) -> dict[str, Any]:
    """The ``host_activity`` and ``torch_compiles`` keys of a part's ``--json`` document
    (``records``: the JSON writer's DataFrame-to-rows function)."""
    extra: dict[str, Any] = {}
    activity = result.host_activity
    if activity is not None:
        extra["host_activity"] = {
            "step_source": activity.source,
            "device_planes": activity.device_planes,
            "steps": records(activity.steps.head(MAX_JSON_ROWS)),
            "steps_total": len(activity.steps),
            "hot": records(activity.hot.head(MAX_JSON_ROWS)),
        }
    if result.torch_compiles is not None:
        extra["torch_compiles"] = records(result.torch_compiles.head(MAX_JSON_ROWS))
        extra["torch_compiles_total"] = len(result.torch_compiles)
    return extra


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
    activity = result.host_activity
    if activity is not None and len(activity.steps):
        columns = ["step", *(k for k, _ in _HOST_COLUMNS if activity.steps[k].notna().any())]
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
