"""The device sections of the console and HTML reports, laid out from a finished result's
``DeviceView`` (the pipeline made it, ``xlaprof.tables.device.view``): its rows' numbers
written as text here, each table by its columns (``COLUMNS``); nothing is computed here. A
view saved as text (a document of version 2 or older) is shown as it was written."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from xlaprof.parse.units import NOT_MEASURED, format_percent, format_rate, format_seconds

if TYPE_CHECKING:
    from rich.console import Console

    from xlaprof.model.result import DeviceView, Rows

__all__ = ["COLUMNS", "render_console", "render_html", "text_rows"]

# Op categories and bottleneck classes as the tables name them.
CATEGORY_NAMES = {
    "matmul_conv": "matmul/conv",
    "fusion": "fusion",
    "collective": "collective",
    "copy": "copy",
    "infeed_outfeed": "in/outfeed",
    "host_offload": "offload",
    "autotune": "autotuning",
    "other": "other",
}
BOTTLENECK_NAMES = {
    "collective": "collectives",
    "infeed_outfeed": "infeed/outfeed",
    "async_wait": "async copy waits",
    "input_transfer": "input transfers",
    "compilation": "compilation",
    "memory_bound": "memory-bound ops",
    "compute": "compute",
    "input": "input (host)",
    "tracing": "idle: host, unattributed",
    "host": "host (other)",
}
# Widest op label (a kernel's short name and the op it ran inside) and top-op cell.
OP_WIDTH = 48
TOP_OP_WIDTH = 40

Cell = Callable[[Mapping[str, Any]], str]


def _text(key: str) -> Cell:
    return lambda row: NOT_MEASURED if row.get(key) is None else str(row[key])


def _seconds(key: str) -> Cell:
    return lambda row: format_seconds(row.get(key))


def _percent(key: str) -> Cell:
    return lambda row: format_percent(row.get(key))


def _count(key: str) -> Cell:
    return lambda row: NOT_MEASURED if row.get(key) is None else f"{row[key]:,}"


def _shares(names: Mapping[str, str], key: str = "split") -> Cell:
    """``fusion 62%, offload 35%``: a row's largest parts with their shares."""

    def cell(row: Mapping[str, Any]) -> str:
        shares = row.get(key)
        if shares is None:
            return NOT_MEASURED
        return ", ".join(f"{names.get(name, name)} {share:.0%}" for name, share in shares)

    return cell


def _bottleneck(row: Mapping[str, Any]) -> str:
    name = row.get("bottleneck")
    if name is None:
        return NOT_MEASURED
    return f"{BOTTLENECK_NAMES.get(name, name)} {format_percent(row.get('share'))}"


def _op(row: Mapping[str, Any]) -> str:
    """An op as a person reads it: a kernel's function name (no template arguments or
    parameters; the full name is in --json), and the op it ran inside (``in call.4``)."""
    shown = row.get("short_name") or str(row.get("name"))
    parent = row.get("parent")
    if parent:
        inside = f" (in {parent})"
        return shown[: max(OP_WIDTH - len(inside), 12)] + inside
    return shown[:OP_WIDTH]


def _line(row: Mapping[str, Any]) -> str:
    file = row.get("file")
    if file is None:
        return "(no user line)"
    pieces = str(file).replace("\\", "/").split("/")
    return f"{pieces[-1] if len(pieces) > 1 else file}:{row.get('line')}"


def _slowest(row: Mapping[str, Any]) -> str:
    return f"{format_seconds(row.get('slowest_s'))} (#{row.get('slowest_step')})"


def _window(row: Mapping[str, Any]) -> str:
    steps = row.get("steps")
    return str(steps) if steps else "whole capture"


HOST: list[tuple[str, Cell]] = [("host", _text("host"))]
# Each device table's columns: the header and how a row's numbers read in it. A column whose
# key is absent from the rows is left out (``host``: on a capture of one host).
COLUMNS: dict[str, list[tuple[str, Cell]]] = {
    "devices": [
        *HOST,
        ("device", _text("device")),
        ("type", _text("type")),
        ("span", _seconds("span_s")),
        ("busy", _seconds("busy_s")),
        ("idle", _seconds("idle_s")),
        ("duty", _percent("duty")),
        ("op time by category", _shares(CATEGORY_NAMES, "categories")),
    ],
    "steps": [
        ("device", _text("device")),
        ("steps", _text("steps")),
        ("from", _text("step_source")),
        ("median wall", _seconds("median_wall_s")),
        ("median busy", _seconds("median_busy_s")),
        ("median idle", _seconds("median_idle_s")),
        ("slowest", _slowest),
    ],
    "ops": [
        ("op", _op),
        ("category", lambda row: CATEGORY_NAMES.get(row["category"], str(row["category"]))),
        ("count", _count("occurrences")),
        ("total", _seconds("total_s")),
        ("self", _seconds("self_s")),
        ("FLOP/s", lambda row: format_rate(row.get("flops_per_s"), "FLOP")),
        ("bytes/s", lambda row: format_rate(row.get("bytes_per_s"), "B")),
        ("bound", _text("bound")),
    ],
    "bottleneck_devices": [
        *HOST,
        ("device", _text("device")),
        ("steps", _window),
        ("bottleneck", _bottleneck),
        ("split", _shares(BOTTLENECK_NAMES)),
    ],
    "bottlenecks": [
        *HOST,
        ("device", _text("device")),
        ("step", _text("step")),
        ("wall", _seconds("wall_s")),
        ("busy", _seconds("busy_s")),
        ("bottleneck", _bottleneck),
        ("split", _shares(BOTTLENECK_NAMES)),
    ],
    "lines": [
        ("line", _line),
        ("function", _text("function")),
        ("device time", _seconds("device_s")),
        ("share", _percent("share")),
        ("top op", lambda row: str(row.get("top_op"))[:TOP_OP_WIDTH]),
    ],
    "tracing": [
        ("host", _text("host")),
        ("step", _text("step")),
        ("host wall", _seconds("host_wall_s")),
        ("host work", _seconds("host_busy_s")),
        ("device busy", _seconds("device_busy_s")),
        ("device idle", _seconds("device_idle_s")),
        ("largest part", _text("bound")),
    ],
}
# The key each column reads, where it reads one (a column whose key no row has is left out).
_KEYS = {
    "host": "host",
    "host work": "host_busy_s",
    "device idle": "device_idle_s",
}


def text_rows(table: str, rows: Rows) -> list[dict[str, str]]:
    """``rows`` of device table ``table`` as the reports show them: each column's header and
    text. Rows saved as text (an older document) are shown as they were written."""
    if not rows or all(isinstance(value, str) for value in rows[0].values()):
        return [{key: str(value) for key, value in row.items()} for row in rows]
    present = set(rows[0])
    columns = [
        (header, cell)
        for header, cell in COLUMNS[table]
        if header not in _KEYS or _KEYS[header] in present
    ]
    return [{header: cell(row) for header, cell in columns} for row in rows]


def render_console(console: Console, view: DeviceView) -> None:
    """The device section of ``xlaprof analyze``'s terminal output."""
    if not view.devices:
        console.print("No device events in this trace.", style="dim")
        console.print()
        return
    title = f"Devices of {view.where}" + (f", session {view.session}" if view.session else "")
    _table(console, title, text_rows("devices", view.devices))
    if view.steps:
        _table(console, "Device steps", text_rows("steps", view.steps))
    _note(console, view.step_note)
    if view.ops:
        _table(console, "Top device ops (all devices)", text_rows("ops", view.ops))
    _note(console, view.autotune_note)
    if view.bottleneck_devices:
        rows = text_rows("bottleneck_devices", view.bottleneck_devices)
        _table(console, "Bottleneck by device (captured steps)", rows)
    per_step = text_rows("bottlenecks", view.bottlenecks)
    if per_step and any(row["step"] != NOT_MEASURED for row in per_step):
        _table(console, "Bottleneck per step", per_step)
        _note(console, view.bottleneck_note)
    if view.lines:
        _table(console, "Device time by source line", text_rows("lines", view.lines))
    _note(console, view.line_note)
    if not view.tracing:
        return
    _table(console, view.tracing_title, text_rows("tracing", view.tracing))
    if view.tracing_hidden > 0:  # the table is cut: say so rather than let 8 rows pass for all
        console.print(f"({view.tracing_hidden:,} more steps in --json)")
        console.print()
    if view.verdict:
        console.print(view.verdict)
        console.print()


def _note(console: Console, note: str | None) -> None:
    """A dim note under a table, and a blank line; nothing when there is no note."""
    if note:
        console.print(note, style="dim")
        console.print()


def _table(console: Console, title: str, rows: list[dict[str, str]]) -> None:
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=None)
    for index, key in enumerate(rows[0]):
        widest = max(len(row[key]) for row in rows)
        table.add_column(
            key,
            justify="left" if index < 2 else "right",
            overflow="fold",
            min_width=min(widest, 24) if index == 0 else None,
        )
    for row in rows:
        table.add_row(*row.values())
    console.print(table)
    console.print()


def render_html(view: DeviceView) -> str:
    """The device section of the HTML report (tables; the figures come with the others)."""
    from xlaprof.escape import html_text

    sections = [f'<p class="meta">{html_text(view.meta)}</p>']
    for warning in view.warnings:
        sections.append(f'<p class="warn">{html_text(warning)}</p>')
    for title, table, rows in (
        ("Each device over the capture", "devices", view.devices),
        ("Device steps", "steps", view.steps),
        ("Top device ops (all devices)", "ops", view.ops),
        ("Bottleneck by device (captured steps)", "bottleneck_devices", view.bottleneck_devices),
        ("Bottleneck per step", "bottlenecks", view.bottlenecks),
        ("Device time by source line", "lines", view.lines),
        (view.tracing_title, "tracing", view.tracing),
    ):
        if rows:
            shown = _html_table(text_rows(table, rows))
            sections.append(f"<h3>{html_text(title)}</h3>{shown}")
    more = f"({view.tracing_hidden:,} more steps in the JSON document.)"
    notes = (
        view.step_note,
        view.autotune_note,
        view.bottleneck_note,
        view.line_note,
        more if view.tracing_hidden > 0 else None,
        view.verdict,
    )
    for line in notes:
        if line:
            sections.append(f"<p>{html_text(line)}</p>")
    if len(sections) == 1 + len(view.warnings):
        sections.append("<p>No device events in this trace.</p>")
    return "".join(sections)


def _html_table(rows: list[dict[str, str]]) -> str:
    from xlaprof.escape import html_text

    head = "".join(f"<th>{html_text(key)}</th>" for key in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{html_text(value)}</td>" for value in row.values()) + "</tr>"
        for row in rows
    )
    return f'<table class="data"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
