"""The device sections of the console and HTML reports, laid out from a finished result's
``DeviceView`` (the pipeline made it, ``xlaprof.tables.device.view``; nothing is computed
here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlaprof.parse.units import NOT_MEASURED

if TYPE_CHECKING:
    from rich.console import Console

    from xlaprof.model.result import DeviceView

__all__ = ["render_console", "render_html"]


def render_console(console: Console, view: DeviceView) -> None:
    """The device section of ``xlaprof analyze``'s terminal output."""
    if not view.devices:
        console.print("No device events in this trace.", style="dim")
        console.print()
        return
    title = f"Devices of {view.where}" + (f", session {view.session}" if view.session else "")
    _table(console, title, view.devices)
    if view.steps:
        _table(console, "Device steps", view.steps)
    _note(console, view.step_note)
    if view.ops:
        _table(console, "Top device ops (all devices)", view.ops)
    _note(console, view.autotune_note)
    if view.bottleneck_devices:
        _table(console, "Bottleneck by device (captured steps)", view.bottleneck_devices)
    per_step = view.bottlenecks
    if per_step and any(row["step"] != NOT_MEASURED for row in per_step):
        _table(console, "Bottleneck per step", per_step)
        _note(console, view.bottleneck_note)
    if view.lines:
        _table(console, "Device time by source line", view.lines)
    _note(console, view.line_note)
    if not view.tracing:
        return
    _table(console, view.tracing_title, view.tracing)
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
    for title, rows in (
        ("Each device over the capture", view.devices),
        ("Device steps", view.steps),
        ("Top device ops (all devices)", view.ops),
        ("Bottleneck by device (captured steps)", view.bottleneck_devices),
        ("Bottleneck per step", view.bottlenecks),
        ("Device time by source line", view.lines),
        (view.tracing_title, view.tracing),
    ):
        if rows:
            sections.append(f"<h3>{html_text(title)}</h3>{_html_table(rows)}")
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
