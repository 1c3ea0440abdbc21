"""The device sections of the console and HTML reports, laid out from a finished result's
``DeviceView`` (the pipeline made it, ``xlaprof.tables.device.view``): its rows' numbers
written as text here, each table by its columns (``COLUMNS``), and its notes worded from the
facts the view holds (``device_words``); nothing is computed here. A view saved as text (a
document of version 2 or older: its rows; 3 or older: its notes) is shown as it was written."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xlaprof.parse.units import NOT_MEASURED, format_percent, format_rate, format_seconds

if TYPE_CHECKING:
    from rich.console import Console

    from xlaprof.model.result import DeviceView, Rows, TracedSteps

__all__ = ["COLUMNS", "DeviceWords", "device_words", "render_console", "render_html", "text_rows"]

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


@dataclass(frozen=True)
class DeviceWords:
    """What the device section says around its tables, as a person reads it: where the
    capture was read (its host or host count), the line under the section's title
    (``meta``), the capture's header line, its device kinds, the notes under the tables, the
    host-vs-device table's title and the verdict on the traced steps (None: nothing to say)."""

    where: str
    meta: str
    capture: str
    device_types: str | None
    step_note: str | None
    autotune_note: str | None
    bottleneck_note: str | None
    line_note: str | None
    tracing_title: str
    verdict: str | None


def device_words(view: DeviceView) -> DeviceWords:
    """The words of ``view``'s notes: made from its facts, or, a view an older document wrote
    with its notes as text, those."""
    if view.written is not None:
        said = view.written
        return DeviceWords(
            where=said.get("where") or "",
            meta=said.get("meta") or "",
            capture=said.get("capture") or "",
            device_types=said.get("device_types"),
            step_note=said.get("step_note"),
            autotune_note=said.get("autotune_note"),
            bottleneck_note=said.get("bottleneck_note"),
            line_note=said.get("line_note"),
            tracing_title=said.get("tracing_title") or "",
            verdict=said.get("verdict"),
        )
    where = view.host if view.hosts == 1 and view.host is not None else f"{view.hosts} hosts"
    meta = where + (f", session {view.session}" if view.session else "")
    if len(view.sessions) > 1:
        meta += f" (of {len(view.sessions)} sessions: {', '.join(view.sessions)})"
    shown = bool(view.devices)
    return DeviceWords(
        where=where,
        meta=meta,
        capture=_capture_line(view),
        device_types=", ".join(f"{count} x {kind}" for kind, count in view.device_kinds) or None,
        step_note=STEP_NOTES.get(view.step_fallback or "") if shown else None,
        autotune_note=_autotune_note(view) if shown else None,
        bottleneck_note=_bottleneck_note(view.bottleneck_hidden) if shown else None,
        line_note=_line_note(view.line_coverage) if shown else None,
        tracing_title=(TRACING_TITLES[view.tracing_lazy] if shown else ""),
        verdict=None if view.traced is None else _verdict(view.traced),
    )


# What is said where a device's steps were not found by a Steps line or step markers (the
# view's ``step_fallback``).
STEP_NOTES = {
    "module executions": (
        "No Steps line and no step markers in this capture: each device's steps are its "
        "XLA module executions, as in XProf."
    ),
    "whole capture": (
        "No Steps line, step markers or module executions in this capture: each device's "
        "whole capture is one window (step —)."
    ),
}
# The host-vs-device table's title, by whether its host figure is lazy tracing.
TRACING_TITLES = {True: "Host work vs device busy, per step", False: "Host vs device, per step"}


def _capture_line(view: DeviceView) -> str:
    """``path  (capture: 26,723 events, 1 host(s), 4 device(s), session ...)``; a capture
    with no device plane counts the host CPU its XLA ops ran on, and says so."""
    where = view.capture_file or f"{view.capture_files} capture files"
    counted = f"{view.device_count} device(s)"
    if view.host_cpu:
        counted += " (the host CPU: no device plane)"  # what its XLA ops ran on
    parts = [f"{view.events:,} events", f"{view.hosts} host(s)", counted]
    if view.session:
        parts.append(f"session {view.session}")
    return f"{where}  (capture: {', '.join(parts)})"


def _autotune_note(view: DeviceView) -> str | None:
    """What the top ops leave out: GPU work the compiler ran while compiling."""
    if view.autotune_kernels is None:
        return None
    numbers = view.autotune_steps
    where = ""
    if numbers:
        shown = ", ".join(str(n) for n in numbers[:8]) + (", ..." if len(numbers) > 8 else "")
        where = f" in step{'s' if len(numbers) > 1 else ''} {shown}"
    return (
        f"Not in the top ops: {view.autotune_kernels:,} GPU kernels and copies "
        f"({format_seconds(view.autotune_s)}) that XLA's compiler ran while compiling{where} "
        "(autotuning: candidate kernels timed, redzone checks): category autotune in --json "
        "and device_ops()."
    )


def _bottleneck_note(hidden: int) -> str | None:
    if hidden <= 0:
        return None
    return (
        f"({hidden:,} more device steps in --json and Trace.bottlenecks(); the device table "
        "above judges each device over its captured steps: the first and last of more than "
        "five left out, as XProf does.)"
    )


def _line_note(coverage: float | None) -> str | None:
    """How much of the device's op time reached a user line, and what a region can show."""
    if coverage is None:
        return None
    return (
        f"{coverage:.1%} of device op time (self time) has a user source line, from the HLO "
        "the capture embeds (the innermost frame outside installed packages). Device time per "
        "xlaprof.region is not separable within a compiled graph: a region marks host time, "
        "and its ops run inside the step's graph (a region compiled as its own graph shows "
        "as its module in --json)."
    )


def _verdict(traced: TracedSteps) -> str:
    """One line saying what the traced steps' time went to most."""
    median_busy = format_seconds(traced.median_busy_s)
    said = (
        f"From the trace: the largest part of {traced.steps} of {traced.known} steps is "
        f"{traced.bound}"
    )
    if traced.lazy:
        return (
            f"{said}; the runtime's host work the trace measures (graph build, copies, "
            f"dispatch; the host's Python is not in it) takes "
            f"{format_seconds(traced.median_tracing_s)} per step (median) while the device "
            f"is busy {median_busy}."
        )
    return (
        f"{said}; the device idles {format_seconds(traced.median_idle_s)} of each "
        f"step (median) and is busy {median_busy}. No torch_xla (lazy-tensor) events in this "
        "capture: the host time is not tracing but whatever the host does between the device's "
        "work (Python, input batches, data loading, kernel launches)."
    )


def shows_bottlenecks(view: DeviceView | None) -> bool:
    """Whether the device section shows a bottleneck table (by device, or per step with a
    measured row): what a report may point to for where the steps' time went."""
    if view is None or not view.devices:
        return False
    per_step = text_rows("bottlenecks", view.bottlenecks)
    return bool(view.bottleneck_devices) or any(row["step"] != NOT_MEASURED for row in per_step)


def render_console(console: Console, view: DeviceView) -> None:
    """The device section of ``xlaprof analyze``'s terminal output."""
    if not view.devices:
        console.print("No device events in this trace.", style="dim")
        console.print()
        return
    words = device_words(view)
    title = f"Devices of {words.where}" + (f", session {view.session}" if view.session else "")
    _table(console, title, text_rows("devices", view.devices))
    if view.steps:
        _table(console, "Device steps", text_rows("steps", view.steps))
    _note(console, words.step_note)
    if view.ops:
        _table(console, "Top device ops (all devices)", text_rows("ops", view.ops))
    _note(console, words.autotune_note)
    if view.bottleneck_devices:
        rows = text_rows("bottleneck_devices", view.bottleneck_devices)
        _table(console, "Bottleneck by device (captured steps)", rows)
    per_step = text_rows("bottlenecks", view.bottlenecks)
    if per_step and any(row["step"] != NOT_MEASURED for row in per_step):
        _table(console, "Bottleneck per step", per_step)
        _note(console, words.bottleneck_note)
    if view.lines:
        _table(console, "Device time by source line", text_rows("lines", view.lines))
    _note(console, words.line_note)
    if not view.tracing:
        return
    _table(console, words.tracing_title, text_rows("tracing", view.tracing))
    if view.tracing_hidden > 0:  # the table is cut: say so rather than let 8 rows pass for all
        console.print(f"({view.tracing_hidden:,} more steps in --json)")
        console.print()
    if words.verdict:
        console.print(words.verdict)
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

    words = device_words(view)
    sections = [f'<p class="meta">{html_text(words.meta)}</p>']
    for warning in view.warnings:
        sections.append(f'<p class="warn">{html_text(warning)}</p>')
    for title, table, rows in (
        ("Each device over the capture", "devices", view.devices),
        ("Device steps", "steps", view.steps),
        ("Top device ops (all devices)", "ops", view.ops),
        ("Bottleneck by device (captured steps)", "bottleneck_devices", view.bottleneck_devices),
        ("Bottleneck per step", "bottlenecks", view.bottlenecks),
        ("Device time by source line", "lines", view.lines),
        (words.tracing_title, "tracing", view.tracing),
    ):
        if rows:
            shown = _html_table(text_rows(table, rows))
            sections.append(f"<h3>{html_text(title)}</h3>{shown}")
    more = f"({view.tracing_hidden:,} more steps in the JSON document.)"
    notes = (
        words.step_note,
        words.autotune_note,
        words.bottleneck_note,
        words.line_note,
        more if view.tracing_hidden > 0 else None,
        words.verdict,
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
