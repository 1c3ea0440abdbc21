"""The device sections of the console and HTML reports: devices, steps, top ops, tracing.

Presentation only: every number comes from ``Trace.summary()`` (``xlaprof.tables.device``)
and, for what is said of every step at once, its overview (``xlaprof.tables.step_stats``: a
pod's is merged from its workers, its per-step rows stay on disk); here it is chosen, ordered
and formatted. A value that was not measured shows as "—".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xlaprof.parse.units import (
    NOT_MEASURED,
    format_percent,
    format_rate,
    format_seconds,
    missing,
)
from xlaprof.tables.step_stats import overview_of

if TYPE_CHECKING:
    from rich.console import Console

    from xlaprof.model.trace import Trace

TOP_OPS = 10
# Category columns, in the order the tables show them.
CATEGORY_LABELS = (
    ("matmul_conv_s", "matmul/conv"),
    ("fusion_s", "fusion"),
    ("collective_s", "collective"),
    ("copy_s", "copy"),
    ("infeed_outfeed_s", "in/outfeed"),
    ("host_offload_s", "offload"),
    ("autotune_s", "autotuning"),
    ("other_s", "other"),
)
# The device table's category column: each category's share of the ops' time. On a GPU the ops'
# times add up to more than busy time (kernels overlap), so the shares are of their sum.
CATEGORY_HEADER = "op time by category"
CATEGORY_NAMES = {key.removesuffix("_s"): label for key, label in CATEGORY_LABELS}


def capture_line(trace: Trace) -> str:
    """``path  (capture: 26,723 events, 1 host, 4 devices, session ...)``."""
    files = trace.files
    where = str(files[0]) if len(files) == 1 else f"{len(files)} capture files"
    # the devices the device table below shows (a CPU capture's is the host's CPU, which has no
    # device plane of its own)
    devices = len(trace.summary().utilization) if trace.device_summary is not None else 0
    if not devices and trace.devices is not None:
        devices = len(trace.devices)
    parts = [
        f"{trace.event_count:,} events",
        f"{len(trace.hosts)} host(s)",
        f"{devices} device(s)",
    ]
    if trace.session:
        parts.append(f"session {trace.session}")
    return f"{where}  (capture: {', '.join(parts)})"


def device_rows(trace: Trace) -> list[dict[str, str]]:
    """One row per device: where the capture's device time went."""
    utilization = trace.summary().utilization
    types = {}
    if trace.devices is not None and not trace.devices.empty:
        for r in trace.devices.itertuples(index=False):
            named = r.type if not missing(r.type) else None
            if named is None and not missing(r.vendor):
                named = f"{r.vendor} {r.kind}"
            types[(str(r.host), str(r.device))] = named
    several_hosts = utilization["host"].nunique() > 1
    rows = []
    for row in utilization.itertuples(index=False):
        kind = types.get((str(row.host), str(row.device)))
        cells = {"host": str(row.host)} if several_hosts else {}
        cells.update(
            {
                "device": str(row.device),
                "type": str(kind) if not missing(kind) else str(row.kind),
                "span": format_seconds(row.span_s),
                "busy": format_seconds(row.busy_s),
                "idle": format_seconds(row.idle_s),
                "duty": format_percent(row.duty),
                CATEGORY_HEADER: category_split(row._asdict()),
            }
        )
        rows.append(cells)
    return rows


def category_split(values: dict[str, Any]) -> str:
    """``fusion 62%, offload 35%``: each category's share of the ops' time, largest first.

    The per-category seconds are the ops' self times: on a TPU they add up to busy time, on a
    GPU to more (kernels overlap on one stream and across streams), so the shares are of their
    sum and add up to 100%, never to more.
    """
    shares = [
        (float(values.get(key) or 0.0), label)
        for key, label in CATEGORY_LABELS
        if not missing(values.get(key)) and values.get(key)
    ]
    total = sum(seconds for seconds, _ in shares)
    if not total:
        return NOT_MEASURED
    shares.sort(reverse=True)
    return ", ".join(
        f"{label} {seconds / total:.0%}"
        for seconds, label in shares[:3]
        if seconds / total >= 0.005
    )


def step_note(trace: Trace) -> str | None:
    """Say so when steps did not come from a Steps line or step markers (XProf's fallback)."""
    sources = set(trace.summary().utilization["step_source"].dropna())
    if "module executions" in sources:
        return (
            "No Steps line and no step markers in this capture: each device's steps are its "
            "XLA module executions, as in XProf."
        )
    if "whole capture" in sources:
        return (
            "No Steps line, step markers or module executions in this capture: each device's "
            "whole capture is one window (step —)."
        )
    return None


def step_rows(trace: Trace, limit: int = 8) -> list[dict[str, str]]:
    """The device steps to show: per device, median of its numbered steps and the slowest."""
    rows = []
    for row in overview_of(trace.summary()).devices.itertuples(index=False):
        rows.append(
            {
                "device": str(row.device),
                "steps": str(row.steps),
                "from": str(row.step_source),
                "median wall": format_seconds(row.median_wall_s),
                "median busy": format_seconds(row.median_busy_s),
                "median idle": format_seconds(row.median_idle_s),
                "slowest": f"{format_seconds(row.slowest_s)} (#{row.slowest_step})",
            }
        )
    return rows[:limit]


def op_rows(trace: Trace, limit: int = TOP_OPS) -> list[dict[str, str]]:
    """The top device ops over all devices, most device time first."""
    from xlaprof.tables.device import add_rates, top_ops

    ops = trace.summary().ops
    ops = ops[ops["category"] != "autotune"]  # the compiler's, not the program's: a note says so
    if ops.empty:
        return []
    by_op = top_ops(ops, limit=limit)
    shown = ops[ops["name"].isin(by_op["name"])]  # a Python call per op: the shown ones only
    bounds = shown.groupby("name", observed=True)["bound"].agg(
        lambda values: next((v for v in values if v), None)
    )
    by_op["host"], by_op["device"] = "", ""
    add_rates(by_op, None)  # rates of the sums; the roofline side is each device's own
    rows = []
    for row in by_op.itertuples(index=False):
        rows.append(
            {
                "op": str(row.name)[:48],
                "category": CATEGORY_NAMES.get(str(row.category), str(row.category)),
                "count": f"{row.occurrences:,}",
                "total": format_seconds(row.total_s),
                "self": format_seconds(row.self_s),
                "FLOP/s": format_rate(row.flops_per_s, "FLOP"),
                "bytes/s": format_rate(row.bytes_per_s, "B"),
                "bound": bounds.get(row.name) or NOT_MEASURED,
            }
        )
    return rows


def autotune_note(trace: Trace) -> str | None:
    """Say what the top ops leave out: GPU work the compiler ran while compiling."""
    summary = trace.summary()
    ops = summary.ops[summary.ops["category"] == "autotune"]
    if ops.empty:
        return None
    numbers = overview_of(summary).autotune_steps  # the smallest, sorted
    where = ""
    if numbers:
        shown = ", ".join(str(n) for n in numbers[:8]) + (", ..." if len(numbers) > 8 else "")
        where = f" in step{'s' if len(numbers) > 1 else ''} {shown}"
    return (
        f"Not in the top ops: {int(ops['occurrences'].sum()):,} GPU kernels and copies "
        f"({format_seconds(ops['total_s'].sum())}) that XLA's compiler ran while compiling{where} "
        "(autotuning: candidate kernels timed, redzone checks): category autotune in --json "
        "and device_ops()."
    )


def tracing_title(trace: Trace) -> str:
    """The host-vs-device table's title: it names what the host figure is."""
    if overview_of(trace.summary()).tracing.lazy:
        return "Host tracing vs device busy, per step"
    return "Host vs device, per step"


_VERDICTS = {"tracing": "tracing-bound", "host": "host-bound", "device": "device-bound"}


def tracing_rows(trace: Trace, limit: int = 8) -> list[dict[str, str]]:
    """Per host step: host wall, the host figure (tracing or device idle), busy, verdict."""
    summary = trace.summary()
    lazy = overview_of(summary).tracing.lazy
    rows = []
    for row in summary.head("tracing", limit).itertuples(index=False):
        bound = None if missing(row.bound) else str(row.bound)
        cells = {
            "host": str(row.host),
            "step": str(row.step),
            "host wall": format_seconds(row.host_wall_s),
        }
        if lazy:
            cells["tracing"] = format_seconds(row.tracing_s)
            cells["device busy"] = format_seconds(row.device_busy_s)
        else:
            cells["device busy"] = format_seconds(row.device_busy_s)
            cells["device idle"] = format_seconds(row.device_idle_s)
        cells["verdict"] = NOT_MEASURED if bound is None else _VERDICTS.get(bound, bound)
        rows.append(cells)
    return rows


def tracing_verdict(trace: Trace) -> str | None:
    """One line answering "what bounds these steps?" from the trace, or None.

    On a torch_xla capture: is the step tracing-bound. Elsewhere (JAX, PyTorch eager) there is
    no lazy tracing: the host time is what the device idles through, waiting on the host.
    """
    overview = overview_of(trace.summary())
    tracing = overview.tracing
    known = tracing.known
    if not known:
        return None
    median_busy = overview.median_busy_s
    if tracing.lazy_known:
        bound = tracing.bounds.get("tracing", 0)
        what = "tracing-bound" if bound * 2 > known else "not tracing-bound"
        return (
            f"From the trace: {what} ({bound} of {known} steps): the host traces for "
            f"{format_seconds(overview.median_tracing_s)} per step (median) while the device is "
            f"busy {format_seconds(median_busy)}."
        )
    bound = tracing.bounds.get("host", 0)
    what = "host-bound" if bound * 2 > known else "not host-bound"
    return (
        f"From the trace: {what} ({bound} of {known} steps): the device idles "
        f"{format_seconds(overview.median_idle_s)} of each step (median), waiting on the "
        f"host, and is busy {format_seconds(median_busy)}. No torch_xla (lazy-tensor) events in "
        "this capture: the host time is not tracing but whatever the host does between the "
        "device's work (Python, input batches, data loading, kernel launches)."
    )


def render_console(console: Console, trace: Trace) -> None:
    """The device section of ``xlaprof analyze``'s terminal output."""
    devices = device_rows(trace)
    if not devices:
        console.print("No device events in this trace.", style="dim")
        console.print()
        return
    hosts = trace.hosts
    where = hosts[0] if len(hosts) == 1 else f"{len(hosts)} hosts"
    title = f"Devices of {where}" + (f", session {trace.session}" if trace.session else "")
    _table(console, title, devices)
    steps = step_rows(trace)
    if steps:
        _table(console, "Device steps", steps)
    note = step_note(trace)
    if note:
        console.print(note, style="dim")
        console.print()
    ops = op_rows(trace)
    if ops:
        _table(console, "Top device ops (all devices)", ops)
    note = autotune_note(trace)
    if note:
        console.print(note, style="dim")
        console.print()
    tracing = tracing_rows(trace)
    if tracing:
        _table(console, tracing_title(trace), tracing)
        hidden = trace.summary().rows("tracing") - len(tracing)
        if hidden > 0:  # the table is cut: say so rather than let 8 rows pass for all of them
            console.print(f"({hidden:,} more steps in --json)")
            console.print()
        verdict = tracing_verdict(trace)
        if verdict:
            console.print(verdict)
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


def render_html(trace: Trace) -> str:
    """The device section of the HTML report (tables; the figures come with the others)."""
    from xlaprof.escape import html_text

    sections = []
    hosts = trace.hosts
    where = hosts[0] if len(hosts) == 1 else f"{len(hosts)} hosts"
    note = f"{where}" + (f", session {trace.session}" if trace.session else "")
    if len(trace.sessions) > 1:
        note += f" (of {len(trace.sessions)} sessions: {', '.join(trace.sessions)})"
    sections.append(f'<p class="meta">{html_text(note)}</p>')
    for warning in trace.warnings:
        sections.append(f'<p class="warn">{html_text(warning)}</p>')
    for title, rows in (
        ("Each device over the capture", device_rows(trace)),
        ("Device steps", step_rows(trace)),
        ("Top device ops (all devices)", op_rows(trace)),
        (tracing_title(trace), tracing_rows(trace)),
    ):
        if rows:
            sections.append(f"<h3>{html_text(title)}</h3>{_html_table(rows)}")
    hidden = trace.summary().rows("tracing") - len(tracing_rows(trace))
    more = f"({hidden:,} more steps in the JSON document.)" if hidden > 0 else None
    for line in (step_note(trace), autotune_note(trace), more, tracing_verdict(trace)):
        if line:
            sections.append(f"<p>{html_text(line)}</p>")
    if len(sections) == 1 + len(trace.warnings):
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
