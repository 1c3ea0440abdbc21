"""The analysis result's tables as JSON: strict values (not measured is null) and the
``trace`` object of the ``--json`` document, made once by the pipeline (``PartResult.trace_json``)
so that the renderer writes it and computes nothing.

The keys are the ``xlaprof.analysis/1`` contract's (docs/json-format.md).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.model.input import HostActivity
    from xlaprof.model.trace import Trace
    from xlaprof.parse.debug_log import DebugEvent
    from xlaprof.parse.metrics_report import MetricsReport


class StrictRows(list[dict[str, Any]]):
    """A table's rows already strict (``records``): ``strict_json`` takes them as they are,
    rather than walk each of their values again (on an 80 MB capture's document, 7,300 of its
    7,500 objects)."""


def strict_json(value: Any) -> Any:
    """Strict JSON: NaN, infinities and pandas' NA become null (the one place this is done)."""
    if type(value) is StrictRows:
        return value
    if type(value).__name__ == "NAType":
        return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    return value


def strict_document(document: dict[Any, Any]) -> dict[str, Any]:
    """``strict_json`` of a dict (a document, a table's row), typed as one: keys as strings."""
    return {str(k): strict_json(v) for k, v in document.items()}


def records(frame: pd.DataFrame | None) -> StrictRows | None:
    """``frame``'s rows as strict JSON objects, keys the column names as text: the values
    ``frame.astype(object).to_dict(orient="records")`` gives, through ``strict_json``, made a
    column at a time (a numeric column by one ``tolist``). The document's own row writer, and
    so the rows of a whole table the document cuts, for readers that page through it
    (``xlaprof mcp``)."""
    if frame is None:
        return None
    if not len(frame.columns):
        return StrictRows({} for _ in range(len(frame)))
    keys = [str(key) for key in frame.columns]
    columns = [_strict_column(frame.iloc[:, at]) for at in range(len(keys))]
    return StrictRows(dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True))


def _strict_column(column: pd.Series[Any]) -> list[Any]:
    """One column's values as ``records`` writes them: Python numbers (a number that is not
    finite: None), and any other value as pandas boxes it for ``to_dict``, then strict."""
    import numpy as np

    kind = column.dtype.kind if isinstance(column.dtype, np.dtype) else None
    if kind in ("i", "u", "b"):
        return column.to_numpy().tolist()
    if kind == "f":
        numbers = column.to_numpy()
        values: list[Any] = numbers.tolist()
        for at in np.flatnonzero(~np.isfinite(numbers)).tolist():
            values[at] = None
        return values
    if _missing_as_none(column.dtype):
        # Text and whole numbers or truth values that may be missing: pandas' own values, a
        # missing one as None, in one pass (a step table's text columns, ~35,000 values on an
        # 80 MB capture's document, were a quarter of its writing).
        found: list[Any] = column.array.to_numpy(dtype=object, na_value=None).tolist()
        return found
    return [strict_json(_boxed(value)) for value in column.astype(object).tolist()]


def _missing_as_none(dtype: Any) -> bool:
    """Whether a column of ``dtype`` holds only values ``strict_json`` keeps as they are (str,
    Python int or bool) besides its missing ones: pandas' text dtypes and its nullable whole
    number and boolean dtypes (not its nullable floats: a NaN among them is not missing)."""
    import pandas as pd

    if isinstance(dtype, pd.StringDtype):
        return True
    return isinstance(dtype, pd.BooleanDtype) or (
        isinstance(dtype, pd.api.extensions.ExtensionDtype)
        and dtype.kind in ("i", "u")
        and dtype.name.startswith(("Int", "UInt"))
    )


def _boxed(value: Any) -> Any:
    """``value`` as pandas' ``to_dict`` gives it: a numpy number as Python's, a numpy time as
    pandas' ``Timestamp`` or ``Timedelta``."""
    import numpy as np

    if isinstance(value, np.generic):
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return float(value)
        if isinstance(value, np.datetime64):
            import pandas as pd

            return pd.Timestamp(value)
        if isinstance(value, np.timedelta64):
            import pandas as pd

            return pd.Timedelta(value)
    return value


# The longest ops per document: a pod capture has thousands of distinct ops per device.
MAX_DEVICE_OPS = 100
# Per-step rows per document (device steps, tracing): one per host, device and step, so a pod
# of 128 hosts x 730 steps has 93,000 of them. The first rows (hosts in order) are kept and the
# total is given; the stragglers table is the pod's per-step view, and
# xlaprof.Analysis(path).device_steps() and .tracing_vs_device() have every row. Stragglers and
# host skew (one row per step, whatever the hosts) are cut at the same count.
MAX_STEP_ROWS = 5000


def trace_json(trace: Trace, path: str | None = None) -> dict[str, Any]:
    """The ``trace`` object: session, hosts, devices, per-device steps, top ops, tracing."""
    from xlaprof.tables.device import top_ops

    summary = trace.summary()
    devices = devices_table(trace)
    ops = summary.ops.head(MAX_DEVICE_OPS)
    return {
        "path": path,
        "session": trace.session,
        "sessions": trace.sessions,
        "hosts": trace.hosts,
        "files": [str(f) for f in trace.files],
        "warnings": trace.warnings,
        "devices": records(devices),
        "device_steps": records(summary.head("steps", MAX_STEP_ROWS)),
        "device_steps_total": summary.rows("steps"),
        "device_ops": records(ops),
        "device_ops_total": len(summary.ops),
        "top_ops": records(top_ops(summary.ops, limit=20)),
        "tracing": records(summary.head("tracing", MAX_STEP_ROWS)),
        "tracing_total": summary.rows("tracing"),
        **bottleneck_json(trace),
        **lines_json(trace),
    }


def devices_table(trace: Trace) -> pd.DataFrame:
    """Per device: its utilization over the capture and what its plane says of it (type,
    vendor, peaks); the utilization alone for a trace made without a device table."""
    utilization = trace.summary().utilization
    if trace.devices is None:
        return utilization
    return utilization.merge(
        trace.devices.drop(columns=["plane"], errors="ignore"),
        on=["session", "host", "device", "kind"],
        how="left",
    )


# Source lines per document: the ones with the most device time (the total is given).
MAX_LINE_ROWS = 100


def bottleneck_json(trace: Trace) -> dict[str, Any]:
    """``bottlenecks`` (per device and step, capped), ``bottlenecks_total`` and
    ``bottleneck_by_device`` (each device over its steady steps)."""
    from xlaprof.tables.step_stats import by_device, device_bottlenecks

    summary = trace.summary()  # a pod's: its first rows read, the rest counted and summed
    total = summary.rows("bottleneck")
    return {
        "bottlenecks": records(summary.head("bottleneck", MAX_STEP_ROWS)) if total else [],
        "bottlenecks_total": total,
        "bottleneck_by_device": records(device_bottlenecks(by_device(summary))) if total else [],
    }


def lines_json(trace: Trace) -> dict[str, Any]:
    """``device_time_by_line`` (per user line over all devices, capped), its total and the
    share of op time with a line (``device_time_by_line_coverage``; null without HLO)."""
    from xlaprof.tables.device.lines import line_coverage

    lines = trace.summary().lines
    table = trace.device_time_by_line()
    return {
        "device_time_by_line": records(table.head(MAX_LINE_ROWS)),
        "device_time_by_line_total": len(table),
        "device_time_by_line_coverage": None if lines is None else line_coverage(lines),
    }


# Host step, hottest-name and compile rows per document (a capture's or a log's): the first
# rows are kept and the total given; Analysis.host_activity() and .torch_compiles() have all.
MAX_HOST_ROWS = 10_000


def host_json(activity: HostActivity | None, compiles: pd.DataFrame | None) -> dict[str, Any]:
    """The ``host_activity`` and ``torch_compiles`` keys of a part's ``--json`` document
    (docs/json-format.md): a capture's host time per step where it has no device planes, and
    a TORCH_TRACE log's compiles; no key where the part has neither."""
    document: dict[str, Any] = {}
    if activity is not None:
        document["host_activity"] = {
            "step_source": activity.source,
            "device_planes": activity.device_planes,
            "steps": records(activity.steps.head(MAX_HOST_ROWS)),
            "steps_total": len(activity.steps),
            "hot": records(activity.hot.head(MAX_HOST_ROWS)),
        }
    if compiles is not None:
        document["torch_compiles"] = records(compiles.head(MAX_HOST_ROWS))
        document["torch_compiles_total"] = len(compiles)
    return document


def report_json(report: MetricsReport) -> dict[str, Any]:
    """One metrics report as the document's ``reports`` hold it."""
    return {
        "step": report.step,
        "metrics": {
            m.name: {
                "total_samples": m.total_samples,
                "accumulator": m.accumulator,
                "unit": m.unit,
                "rate": m.rate,
                "value_rate": m.value_rate,
                "mean": m.mean,
                "stddev": m.stddev,
                "percentiles": {f"{k:g}": v for k, v in m.percentiles.items()},
            }
            for m in report.metrics.values()
        },
        "counters": dict(report.counters),
    }


def event_json(event: DebugEvent) -> dict[str, Any]:
    """One PT_XLA_DEBUG event as the document's ``debug_events`` hold it."""
    return {
        "kind": event.kind,
        "cause": event.cause,
        "graph_hash": event.graph_hash,
        "graph_inputs": event.graph_inputs,
        "graph_outputs": event.graph_outputs,
        "frames": [{"function": f.function, "file": f.file, "line": f.line} for f in event.frames],
        "memory": None if event.memory is None else asdict(event.memory),
        "step": event.step,
        "truncated": event.truncated,
    }
