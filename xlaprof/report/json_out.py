"""The ``--json`` document: ``xlaprof.analysis/1`` (see docs/json-format.md).

The keys listed in the contract are stable; more keys may be added. Non-finite numbers become
``null`` so the output is strict JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TextIO

from xlaprof.findings import Finding
from xlaprof.model.input import AnalysisInput
from xlaprof.model.parts import SourceInfo
from xlaprof.model.result import AnalysisResult, PartResult, RunComparison
from xlaprof.parse.debug_log import DebugEvent
from xlaprof.parse.metrics_report import MetricsReport
from xlaprof.report.base import RenderOptions

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.model.trace import Trace

SCHEMA = "xlaprof.analysis/1"


def strict_json(value: Any) -> Any:
    """Strict JSON: NaN, infinities and pandas' NA become null (the one place this is done)."""
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


def report_json(report: MetricsReport) -> dict[str, Any]:
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


def analysis_document(
    data: AnalysisInput,
    findings: list[Finding],
    sources: list[SourceInfo],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole ``--json`` document as a dict."""
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "sources": [
            {
                "path": s.path,
                "kinds": s.kinds,
                "reports": s.reports,
                "debug_events": s.debug_events,
                "warnings": [asdict(w) for w in s.warnings],
            }
            for s in sources
        ],
        "reports": [report_json(r) for r in data.reports],
        "debug_events": [event_json(e) for e in data.debug.events],
        "summary": {
            "compiles": data.compiles(),
            "executions": data.executions(),
            "device_to_host_transfers": data.device_to_host_transfers(),
            "aten_fallbacks": data.aten_fallbacks(),
            "steps": data.step_count(),
        },
        "findings": [f.to_json() for f in findings],
    }
    if extra:
        document.update(extra)
    return strict_document(document)


def _records(frame: pd.DataFrame | None) -> list[dict[Hashable, Any]] | None:
    if frame is None:
        return None
    return frame.astype(object).to_dict(orient="records")  # NaN -> None in strict_json


def frame_records(frame: pd.DataFrame | None) -> list[dict[str, Any]] | None:
    """A table's rows exactly as the document writes them (strict JSON: not measured is null):
    for readers that page through a whole table the document cuts (``xlaprof mcp``)."""
    records = _records(frame)
    return None if records is None else [strict_document(row) for row in records]


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
        "devices": _records(devices),
        "device_steps": _records(summary.head("steps", MAX_STEP_ROWS)),
        "device_steps_total": summary.rows("steps"),
        "device_ops": _records(ops),
        "device_ops_total": len(summary.ops),
        "top_ops": _records(top_ops(summary.ops, limit=20)),
        "tracing": _records(summary.head("tracing", MAX_STEP_ROWS)),
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
        "bottlenecks": _records(summary.head("bottleneck", MAX_STEP_ROWS)) if total else [],
        "bottlenecks_total": total,
        "bottleneck_by_device": _records(device_bottlenecks(by_device(summary))) if total else [],
    }


def lines_json(trace: Trace) -> dict[str, Any]:
    """``device_time_by_line`` (per user line over all devices, capped), its total and the
    share of op time with a line (``device_time_by_line_coverage``; null without HLO)."""
    from xlaprof.tables.device.lines import line_coverage

    lines = trace.summary().lines
    table = trace.device_time_by_line()
    return {
        "device_time_by_line": _records(table.head(MAX_LINE_ROWS)),
        "device_time_by_line_total": len(table),
        "device_time_by_line_coverage": None if lines is None else line_coverage(lines),
    }


def result_document(result: PartResult) -> dict[str, Any]:
    """One part's document: the contract plus ``timeline``, ``host_skew`` and ``trace``."""
    part = result.part
    extra: dict[str, Any] = {}
    if part.run_summary is not None:
        extra["run"] = part.run_summary.to_json()
    trace = result.trace
    if trace is not None:
        extra["trace"] = trace_json(trace, part.trace_path)
        if part.trace is not None and trace.source is not None and trace.source.load is not None:
            # hosts read by workers (inputs.pod): where, how long, failures
            extra["trace"]["pod"] = trace.source.load.record()
    if result.story is not None:
        extra["story"] = result.story.to_json()
    if result.timeline is not None:
        extra["timeline"] = _records(result.timeline)
    if result.host_skew is not None:
        extra["host_skew"] = _records(result.host_skew.head(MAX_STEP_ROWS))
        extra["host_skew_total"] = len(result.host_skew)
    if result.stragglers is not None:
        # per step and device; the per-host rows (hosts x steps, the heat map's data) stay out
        # of the document so its size does not grow with the pod: Analysis.host_steps() has them.
        # The first MAX_STEP_ROWS (steps in order) are kept: Analysis.stragglers() has every row.
        extra["stragglers"] = _records(result.stragglers.head(MAX_STEP_ROWS))
        extra["stragglers_total"] = len(result.stragglers)
    from xlaprof.report.host import json_sections

    extra.update(json_sections(result, _records))
    return analysis_document(part.data, result.findings, part.sources, extra)


def results_document(results: list[PartResult]) -> dict[str, Any]:
    """One document for one or more analysis parts (processes of a run).

    With one part this is exactly ``result_document``. With several, the contract's lists are
    concatenated (findings tagged with ``evidence.process``), the summary's counts are summed,
    and ``processes`` holds each part's own document.
    """
    documents = [result_document(result) for result in results]
    if len(documents) == 1:
        return documents[0]
    merged: dict[str, Any] = {
        "schema": SCHEMA,
        "sources": [s for d in documents for s in d["sources"]],
        "reports": [r for d in documents for r in d["reports"]],
        "debug_events": [e for d in documents for e in d["debug_events"]],
        "summary": _sum_summaries([d["summary"] for d in documents]),
        "findings": [],
        "processes": documents,
    }
    for result, document in zip(results, documents, strict=True):
        for finding in document["findings"]:
            merged["findings"].append(
                {**finding, "evidence": {**finding["evidence"], "process": result.part.name}}
            )
    return merged


def _sum_summaries(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    def total(key: str) -> int | None:
        values = [s[key] for s in summaries if s[key] is not None]
        return sum(values) if values else None

    fallbacks: dict[str, int | None] = {}
    for summary in summaries:
        for name, value in summary["aten_fallbacks"].items():
            fallbacks[name] = (fallbacks.get(name) or 0) + (value or 0)
    return {
        "compiles": total("compiles"),
        "executions": total("executions"),
        "device_to_host_transfers": total("device_to_host_transfers"),
        "aten_fallbacks": fallbacks,
        "steps": total("steps"),
    }


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, allow_nan=False)


def write_analysis(result: AnalysisResult, out: TextIO, options: RenderOptions) -> None:
    """The ``--json`` document (``xlaprof.analysis/1``)."""
    out.write(dumps(results_document(result.parts)) + "\n")


DIFF_SCHEMA = "xlaprof.diff/1"


def write_comparison(comparison: RunComparison, out: TextIO, options: RenderOptions) -> None:
    """``xlaprof diff --json`` (``xlaprof.diff/1``): each figure, and the findings that went
    and came."""
    out.write(dumps(comparison_document(comparison)) + "\n")


def comparison_document(comparison: RunComparison) -> dict[str, Any]:
    """The ``xlaprof.diff/1`` document as a dict."""
    document = {
        "schema": DIFF_SCHEMA,
        "before": comparison.before,
        "after": comparison.after,
        "comparison": _records(comparison.table),
        "findings_disappeared": comparison.gone,
        "findings_appeared": comparison.came,
    }
    return strict_document(document)
