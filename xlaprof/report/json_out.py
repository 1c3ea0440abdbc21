"""The ``--json`` document: ``xlaprof.analysis/1`` (see docs/json-format.md).

The keys listed in the contract are stable; more keys may be added. Non-finite numbers become
``null`` so the output is strict JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

from xlaprof.analyze.data import AnalysisInput
from xlaprof.findings import Finding
from xlaprof.inputs import SourceInfo
from xlaprof.parse.debug_log import DebugEvent
from xlaprof.parse.metrics_report import MetricsReport

SCHEMA = "xlaprof.analysis/1"


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


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
    return _clean(document)


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, allow_nan=False)
