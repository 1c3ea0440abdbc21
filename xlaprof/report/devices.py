"""The device sections of the console and HTML reports: devices, steps, top ops, tracing.

Presentation only: every number comes from ``Trace.summary()`` (``xlaprof.analysis.device``);
here it is chosen, ordered and formatted. A value that was not measured shows as "—".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from xlaprof.analysis.trace import Trace

NOT_MEASURED = "—"
TOP_OPS = 10
# Category columns, in the order the tables show them.
CATEGORY_LABELS = (
    ("matmul_conv_s", "matmul/conv"),
    ("fusion_s", "fusion"),
    ("collective_s", "collective"),
    ("copy_s", "copy"),
    ("infeed_outfeed_s", "in/outfeed"),
    ("host_offload_s", "offload"),
    ("other_s", "other"),
)
CATEGORY_NAMES = {key.removesuffix("_s"): label for key, label in CATEGORY_LABELS}


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value) or str(value) == "<NA>"


def duration(seconds: Any) -> str:
    """``92.56 s``, ``12.34 ms``, ``850.0 µs``: a unit that suits the value."""
    if _missing(seconds):
        return NOT_MEASURED
    seconds = float(seconds)
    if abs(seconds) >= 1:
        return f"{seconds:.2f} s"
    if abs(seconds) >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def rate(value: Any, unit: str) -> str:
    """``164.6 GFLOP/s``, ``1.23 TB/s``."""
    if _missing(value):
        return NOT_MEASURED
    value = float(value)
    if value == 0:
        return "0"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {prefix}{unit}/s"
    return f"{value:.1f} {unit}/s"


def percent(value: Any) -> str:
    return NOT_MEASURED if _missing(value) else f"{float(value):.1%}"


def capture_line(trace: Trace) -> str:
    """``path  (capture: 26,723 events, 1 host, 4 devices, session ...)``."""
    files = trace.files
    where = str(files[0]) if len(files) == 1 else f"{len(files)} capture files"
    devices = 0 if trace.devices is None else len(trace.devices)
    parts = [
        f"{len(trace.events):,} events",
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
            named = r.type if not _missing(r.type) else None
            if named is None and not _missing(r.vendor):
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
                "type": str(kind) if not _missing(kind) else str(row.kind),
                "span": duration(row.span_s),
                "busy": duration(row.busy_s),
                "idle": duration(row.idle_s),
                "duty": percent(row.duty),
                "busy time by category": category_split(row._asdict(), row.busy_s),
            }
        )
        rows.append(cells)
    return rows


def category_split(values: dict[str, Any], busy: Any) -> str:
    """``fusion 62%, host offload 35%``: each category's share of busy time, largest first."""
    if _missing(busy) or not busy:
        return NOT_MEASURED
    shares = [(values.get(key) or 0.0, label) for key, label in CATEGORY_LABELS if values.get(key)]
    shares.sort(reverse=True)
    return ", ".join(
        f"{label} {seconds / busy:.0%}" for seconds, label in shares[:3] if seconds / busy >= 0.005
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
    steps = trace.summary().steps
    rows = []
    numbered = steps[steps["step"].notna()]
    for device, group in numbered.groupby("device", sort=True):
        median = group[["wall_s", "busy_s", "idle_s"]].median()
        slowest = group.loc[group["wall_s"].idxmax()]
        rows.append(
            {
                "device": str(device),
                "steps": str(len(group)),
                "from": str(group["step_source"].iloc[0]),
                "median wall": duration(median["wall_s"]),
                "median busy": duration(median["busy_s"]),
                "median idle": duration(median["idle_s"]),
                "slowest": f"{duration(slowest['wall_s'])} (#{slowest['step']})",
            }
        )
    return rows[:limit]


def op_rows(trace: Trace, limit: int = TOP_OPS) -> list[dict[str, str]]:
    """The top device ops over all devices, most device time first."""
    from xlaprof.analysis.device import add_rates, top_ops

    ops = trace.summary().ops
    if ops.empty:
        return []
    by_op = top_ops(ops, limit=limit)
    bounds = ops.groupby("name", observed=True)["bound"].agg(
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
                "total": duration(row.total_s),
                "self": duration(row.self_s),
                "FLOP/s": rate(row.flops_per_s, "FLOP"),
                "bytes/s": rate(row.bytes_per_s, "B"),
                "bound": bounds.get(row.name) or NOT_MEASURED,
            }
        )
    return rows


def tracing_rows(trace: Trace, limit: int = 8) -> list[dict[str, str]]:
    tracing = trace.summary().tracing
    rows = []
    for row in tracing.head(limit).itertuples(index=False):
        verdict = (
            NOT_MEASURED
            if row.tracing_bound is None
            else ("tracing-bound" if row.tracing_bound else "device-bound")
        )
        rows.append(
            {
                "host": str(row.host),
                "step": str(row.step),
                "host wall": duration(row.host_wall_s),
                "tracing": duration(row.tracing_s),
                "device busy": duration(row.device_busy_s),
                "verdict": verdict,
            }
        )
    return rows


def tracing_verdict(trace: Trace) -> str | None:
    """One line answering "is this step tracing-bound?" from the trace, or None."""
    tracing = trace.summary().tracing
    known = tracing[tracing["tracing_bound"].notna()]
    if known.empty:
        return None
    bound = int(known["tracing_bound"].astype(bool).sum())
    median_tracing = known["tracing_s"].median()
    median_busy = known["device_busy_s"].median()
    what = "tracing-bound" if bound * 2 > len(known) else "not tracing-bound"
    return (
        f"From the trace: {what} ({bound} of {len(known)} steps): the host traces for "
        f"{duration(median_tracing)} per step (median) while the device is busy "
        f"{duration(median_busy)}."
    )


def render_console(console: Console, trace: Trace) -> None:
    """The device section of ``xlaprof analyze``'s terminal output."""
    devices = device_rows(trace)
    if not devices:
        console.print("[dim]No device events in this trace.[/dim]")
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
        console.print(f"[dim]{note}[/dim]")
        console.print()
    ops = op_rows(trace)
    if ops:
        _table(console, "Top device ops (all devices)", ops)
    tracing = tracing_rows(trace)
    if tracing:
        _table(console, "Host tracing vs device busy, per step", tracing)
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
    import html

    sections = []
    hosts = trace.hosts
    where = hosts[0] if len(hosts) == 1 else f"{len(hosts)} hosts"
    note = f"{where}" + (f", session {trace.session}" if trace.session else "")
    if len(trace.sessions) > 1:
        note += f" (of {len(trace.sessions)} sessions: {', '.join(trace.sessions)})"
    sections.append(f'<p class="meta">{html.escape(note)}</p>')
    for warning in trace.warnings:
        sections.append(f'<p class="warn">{html.escape(warning)}</p>')
    for title, rows in (
        ("Each device over the capture", device_rows(trace)),
        ("Device steps", step_rows(trace)),
        ("Top device ops (all devices)", op_rows(trace)),
        ("Host tracing vs device busy, per step", tracing_rows(trace)),
    ):
        if rows:
            sections.append(f"<h3>{html.escape(title)}</h3>{_html_table(rows)}")
    for line in (step_note(trace), tracing_verdict(trace)):
        if line:
            sections.append(f"<p>{html.escape(line)}</p>")
    if len(sections) == 1 + len(trace.warnings):
        sections.append("<p>No device events in this trace.</p>")
    return "".join(sections)


def _html_table(rows: list[dict[str, str]]) -> str:
    import html

    head = "".join(f"<th>{html.escape(key)}</th>" for key in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(value)}</td>" for value in row.values()) + "</tr>"
        for row in rows
    )
    return f'<table class="data"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
