"""The device section of a finished result: ``device_view(trace) -> DeviceView``.

The rows the console and HTML reports show of a capture (devices, steps, top ops, bottlenecks,
source lines, host against device), chosen and ordered once, by the pipeline, as numbers
(seconds, shares of one, counts; None where not measured), and what the notes and verdict
around them say, as facts (counts, shares, codes such as how steps were found). The reports
write the rows and the notes as text (``xlaprof.report.devices``): no sentence is made here.
Every number comes from ``Trace.summary()`` (``xlaprof.tables.device``) and, for what is said
of every step at once, its overview (``xlaprof.tables.step_stats``: a pod's is merged from its
workers, its per-step rows stay on disk). The renderers lay the view out; a saved result
carries it, so it re-renders the same. A value that was not measured is None here, and shows
as "—".
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

from xlaprof.model.result import DeviceView, TracedSteps
from xlaprof.parse.units import missing
from xlaprof.tables.step_stats import by_device, device_bottlenecks, overview_of

if TYPE_CHECKING:
    from xlaprof.model.stats import StepOverview
    from xlaprof.model.trace import Trace

TOP_OPS = 10
# The op categories' seconds columns, in the order the tables show them (a device row's
# ``categories`` names each by its column without ``_s``).
CATEGORY_COLUMNS = (
    "matmul_conv_s",
    "fusion_s",
    "collective_s",
    "copy_s",
    "infeed_outfeed_s",
    "host_offload_s",
    "autotune_s",
    "other_s",
)


def capture_facts(trace: Trace) -> dict[str, Any]:
    """What the section's header says of the capture: the one file read (None: several) and
    how many, its events and hosts, and the devices the device table shows (``host_cpu``: a
    capture with no device plane counts the host CPU its XLA ops ran on)."""
    files = trace.files
    # The devices the device table shows: on a CPU capture (no device plane) the host's CPU.
    utilization = trace.summary().utilization if trace.device_summary is not None else None
    if utilization is not None and not utilization.empty:
        devices = len(utilization[["host", "device"]].astype(str).drop_duplicates())
    else:
        devices = 0 if trace.devices is None else len(trace.devices)
    return {
        "capture_file": str(files[0]) if len(files) == 1 else None,
        "capture_files": len(files),
        "events": int(trace.event_count),
        "device_count": devices,
        "host_cpu": bool(devices and (trace.devices is None or trace.devices.empty)),
    }


def _number(value: object) -> float | None:
    """A measured number as a float; None where not measured (None, NaN, <NA>)."""
    return None if missing(value) else float(value)  # type: ignore[arg-type]


def _count(value: object) -> int | None:
    return None if missing(value) else int(value)  # type: ignore[call-overload]


def device_rows(trace: Trace) -> list[dict[str, Any]]:
    """One row per device: where the capture's device time went (seconds, the duty cycle as a
    share, and its op time's largest categories with their shares)."""
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
    for row in utilization.to_dict(orient="records"):
        kind = types.get((str(row["host"]), str(row["device"])))
        cells: dict[str, Any] = {"host": str(row["host"])} if several_hosts else {}
        cells.update(
            {
                "device": str(row["device"]),
                "type": str(kind) if not missing(kind) else str(row["kind"]),
                "span_s": _number(row["span_s"]),
                "busy_s": _number(row["busy_s"]),
                "idle_s": _number(row["idle_s"]),
                "duty": _number(row["duty"]),
                "categories": category_split(row),
            }
        )
        rows.append(cells)
    return rows


def category_split(values: Mapping[Hashable, Any]) -> list[list[Any]] | None:
    """``[["fusion", 0.62], ["host_offload", 0.35]]``: the largest three categories' shares of
    the ops' time, largest first, each at least half a percent (None: no op time measured).

    The per-category seconds are the ops' self times: on a TPU they add up to busy time, on a
    GPU to more (kernels overlap on one stream and across streams), so the shares are of their
    sum and add up to 100%, never to more.
    """
    shares = [
        (float(values.get(key) or 0.0), key.removesuffix("_s"))
        for key in CATEGORY_COLUMNS
        if not missing(values.get(key)) and values.get(key)
    ]
    total = sum(seconds for seconds, _ in shares)
    if not total:
        return None
    shares.sort(reverse=True)
    return [[name, seconds / total] for seconds, name in shares[:3] if seconds / total >= 0.005]


# How a device's steps were found where no Steps line or step markers gave them (XProf's
# fallbacks), as ``utilization.step_source`` names them: the first one found is said.
STEP_FALLBACKS = ("module executions", "whole capture")


def step_fallback(trace: Trace) -> str | None:
    """``module executions`` or ``whole capture`` where steps did not come from a Steps line or
    step markers, else None."""
    sources = set(trace.summary().utilization["step_source"].dropna())
    return next((source for source in STEP_FALLBACKS if source in sources), None)


def step_rows(
    trace: Trace, limit: int = 8, overview: StepOverview | None = None
) -> list[dict[str, Any]]:
    """The device steps to show: per device, median of its numbered steps and the slowest."""
    rows = []
    overview = overview or overview_of(trace.summary())
    for row in overview.devices.itertuples(index=False):
        rows.append(
            {
                "device": str(row.device),
                "steps": _count(row.steps),
                "step_source": str(row.step_source),
                "median_wall_s": _number(row.median_wall_s),
                "median_busy_s": _number(row.median_busy_s),
                "median_idle_s": _number(row.median_idle_s),
                "slowest_s": _number(row.slowest_s),
                "slowest_step": _count(row.slowest_step),
            }
        )
    return rows[:limit]


def op_rows(trace: Trace, limit: int = TOP_OPS) -> list[dict[str, Any]]:
    """The top device ops over all devices, most device time first."""
    from xlaprof.tables.device import add_rates, top_ops

    ops = trace.summary().ops
    ops = ops[ops["category"] != "autotune"]  # the compiler's, not the program's: a note says so
    if ops.empty:
        return []
    by_op = top_ops(ops, limit=limit)
    shown = ops[ops["name"].isin(by_op["name"])]  # a Python call per op: the shown ones only
    # Each op's first bound ("" where none of its rows has one: shown as not measured).
    bounds = shown.groupby("name", observed=True)["bound"].agg(
        lambda values: next((v for v in values if v), "")
    )
    by_op["host"], by_op["device"] = "", ""
    add_rates(by_op, None)  # rates of the sums; the roofline side is each device's own
    rows = []
    for row in by_op.to_dict(orient="records"):
        short, parent = row.get("short_name"), row.get("parent")
        rows.append(
            {
                "name": str(row.get("name")),
                # a kernel's function name (no template arguments or parameters), and the op
                # it ran inside (a wrapper's fusions read as nested)
                "short_name": short if isinstance(short, str) and short else None,
                "parent": parent if isinstance(parent, str) and parent else None,
                "category": str(row["category"]),
                "occurrences": _count(row["occurrences"]),
                "total_s": _number(row["total_s"]),
                "self_s": _number(row["self_s"]),
                "flops_per_s": _number(row["flops_per_s"]),
                "bytes_per_s": _number(row["bytes_per_s"]),
                "bound": bounds.get(row["name"]) or None,
            }
        )
    return rows


def _top_classes(
    values: Mapping[Hashable, Any], wall: float, count: int = 3
) -> list[list[Any]] | None:
    """``[["input", 0.85], ["compute", 0.11]]``: the largest classes' shares of ``wall``, each
    at least 1% (None: no wall time measured)."""
    from xlaprof.tables.device.bottleneck import CLASSES

    if not wall or missing(wall):
        return None
    shares = sorted(
        ((float(values.get(f"{name}_s") or 0.0) / wall, name) for name in CLASSES),
        reverse=True,
    )
    return [[name, share] for share, name in shares[:count] if share >= 0.01]


def bottleneck_rows(trace: Trace, limit: int = 10) -> list[dict[str, Any]]:
    """Per step of the first devices: wall, busy, the bottleneck and where the rest went."""
    summary = trace.summary()
    table = summary.head("bottleneck", limit)  # a pod's first rows only are read
    if table.empty:
        return []
    several_hosts = by_device(summary)["host"].nunique() > 1
    rows = []
    for row in table.to_dict(orient="records"):
        cells: dict[str, Any] = {"host": str(row["host"])} if several_hosts else {}
        step = row["step"]
        cells.update(
            {
                "device": str(row["device"]),
                "step": _count(step),
                "wall_s": _number(row["wall_s"]),
                "busy_s": _number(row["busy_s"]),
                "bottleneck": None if missing(row["bottleneck"]) else str(row["bottleneck"]),
                "share": None if missing(row["bottleneck"]) else _number(row["share"]),
                "split": _top_classes(row, float(row["wall_s"] or 0.0)),
            }
        )
        rows.append(cells)
    return rows


def bottleneck_device_rows(trace: Trace, limit: int = 8) -> list[dict[str, Any]]:
    """Per device over its steady steps: the bottleneck and the largest classes."""
    from xlaprof.tables.device.bottleneck import CLASSES

    if not trace.summary().rows("bottleneck"):
        return []
    summary = device_bottlenecks(by_device(trace.summary()))
    several_hosts = summary["host"].nunique() > 1
    rows = []
    for row in summary.head(limit).to_dict(orient="records"):
        cells: dict[str, Any] = {"host": str(row["host"])} if several_hosts else {}
        values: dict[Hashable, Any] = {f"{name}_s": row[f"{name}_share"] for name in CLASSES}
        cells.update(
            {
                "device": str(row["device"]),
                "steps": _count(row["steps"]),  # 0: the whole capture is one window
                "bottleneck": str(row["bottleneck"]),
                "share": _number(row["share"]),
                "split": _top_classes(values, 1.0),
            }
        )
        rows.append(cells)
    return rows


def bottleneck_hidden(trace: Trace, shown: int) -> int:
    """How many per-step bottleneck rows the table of ``shown`` leaves out."""
    return max(trace.summary().rows("bottleneck") - shown, 0)


def line_rows(trace: Trace, limit: int = 8) -> list[dict[str, Any]]:
    """Device time per user source line (innermost user frame), most first."""
    table = trace.device_time_by_line()
    if table.empty:
        return []
    rows = []
    for row in table.head(limit).to_dict(orient="records"):
        file = row["file"]
        rows.append(
            {
                "file": None if missing(file) else str(file),
                "line": None if missing(file) else _count(row["line"]),
                "function": None if missing(row["function"]) else str(row["function"]),
                "device_s": _number(row["device_s"]),
                "share": _number(row["share"]),
                "top_op": str(row["top_op"]),
            }
        )
    return rows


def line_coverage_of(trace: Trace) -> float | None:
    """The share of the device's op time (self time) that reached a user source line (None:
    no lines measured)."""
    from xlaprof.tables.device.lines import line_coverage

    lines = trace.summary().lines
    if lines is None:
        return None
    coverage = line_coverage(lines)
    return None if coverage is None else float(coverage)


def autotune_facts(trace: Trace, overview: StepOverview | None = None) -> dict[str, Any]:
    """What the top ops leave out: GPU work the compiler ran while compiling (kernels and
    copies, their seconds, and the first nine steps it ran in, smallest first); None each
    where there was none."""
    summary = trace.summary()
    ops = summary.ops[summary.ops["category"] == "autotune"]
    if ops.empty:
        return {"autotune_kernels": None, "autotune_s": None, "autotune_steps": []}
    numbers = (overview or overview_of(summary)).autotune_steps  # the smallest, sorted
    return {
        "autotune_kernels": int(ops["occurrences"].sum()),
        "autotune_s": float(ops["total_s"].sum()),
        "autotune_steps": [int(n) for n in numbers[:9]],
    }


def tracing_lazy(trace: Trace, overview: StepOverview | None = None) -> bool:
    """Whether the host-vs-device table's host figure is the host's lazy-tensor work (else the
    device's idle time)."""
    return bool((overview or overview_of(trace.summary())).tracing.lazy)


def tracing_rows(
    trace: Trace, limit: int = 8, overview: StepOverview | None = None
) -> list[dict[str, Any]]:
    """Per host step: host wall, the host figure (tracing or device idle), busy, verdict."""
    summary = trace.summary()
    lazy = (overview or overview_of(summary)).tracing.lazy
    rows = []
    for row in summary.head("tracing", limit).itertuples(index=False):
        bound = None if missing(row.bound) else str(row.bound)
        cells: dict[str, Any] = {
            "host": str(row.host),
            "step": _count(row.step),
            "host_wall_s": _number(row.host_wall_s),
        }
        if lazy:  # the host's measured work; else the device's idle time
            cells["host_busy_s"] = _number(getattr(row, "host_busy_s", None))
            cells["device_busy_s"] = _number(row.device_busy_s)
        else:
            cells["device_busy_s"] = _number(row.device_busy_s)
            cells["device_idle_s"] = _number(row.device_idle_s)
        cells["bound"] = bound
        rows.append(cells)
    return rows


def traced_steps(trace: Trace, overview: StepOverview | None = None) -> TracedSteps | None:
    """What the traced steps' time went to most, from the one step model (``tables/story.py``:
    the same bounds the step timeline and the bottleneck table show), or None. It describes
    the steps; whether that is worth a fix is the findings' call. (A pod's counts and medians
    come from its workers' aggregates: ``tables.step_stats``.)"""
    overview = overview or overview_of(trace.summary())
    tracing = overview.tracing
    if not tracing.known:
        return None
    top = max(tracing.bounds, key=tracing.bounds.__getitem__)  # the first of equals
    return TracedSteps(
        bound=str(top),
        steps=int(tracing.bounds[top]),
        known=int(tracing.known),
        lazy=bool(tracing.lazy_known),
        median_busy_s=_number(overview.median_busy_s),
        median_tracing_s=_number(overview.median_tracing_s),
        median_idle_s=_number(overview.median_idle_s),
    )


def device_view(trace: Trace) -> DeviceView:
    """Everything the reports show of ``trace``'s devices, computed once."""
    hosts = trace.hosts
    devices = device_rows(trace)
    overview = overview_of(trace.summary()) if devices else None  # once: a pod's is merged
    tracing = tracing_rows(trace, overview=overview) if devices else []
    bottlenecks = bottleneck_rows(trace) if devices else []
    return DeviceView(
        session=trace.session,
        warnings=list(trace.warnings),
        devices=devices,
        steps=step_rows(trace, overview=overview) if devices else [],
        ops=op_rows(trace) if devices else [],
        bottleneck_devices=bottleneck_device_rows(trace) if devices else [],
        bottlenecks=bottlenecks,
        lines=line_rows(trace) if devices else [],
        tracing=tracing,
        tracing_hidden=max(trace.summary().rows("tracing") - len(tracing), 0) if devices else 0,
        hosts=len(hosts),
        host=hosts[0] if len(hosts) == 1 else None,
        sessions=list(trace.sessions),
        device_kinds=_device_kinds(trace),
        step_fallback=step_fallback(trace) if devices else None,
        bottleneck_hidden=bottleneck_hidden(trace, len(bottlenecks)) if devices else 0,
        line_coverage=line_coverage_of(trace) if devices else None,
        tracing_lazy=tracing_lazy(trace, overview) if devices else False,
        traced=traced_steps(trace, overview) if devices else None,
        **capture_facts(trace),
        **(autotune_facts(trace, overview) if devices else {}),
    )


def _device_kinds(trace: Trace) -> list[tuple[str, int]]:
    """Each kind of the trace's device planes with its count, most first (``TPU v6 Lite``,
    4); empty without any."""
    devices = trace.devices
    if devices is None or devices.empty:
        return []
    kinds = devices["type"].fillna(devices["kind"]).astype(str).value_counts()
    return [(str(kind), int(count)) for kind, count in kinds.items()]
