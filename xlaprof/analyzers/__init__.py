"""Analyzers: pure functions from parsed data to ``Finding``s, one module each.

``ANALYZERS`` is the one registry; ``run_analyzers`` applies them all in order and sorts the
findings most severe first. Analyzers take an ``AnalysisInput`` and never read files.
"""

from __future__ import annotations

from collections.abc import Callable

from xlaprof.analyzers import (
    aten_fallback,
    graph_break,
    host_sync,
    memory_pressure,
    recompilation,
    slow_compile,
    tracing_bound,
    unrolled_loop,
)
from xlaprof.findings import Finding
from xlaprof.model.input import AnalysisInput

Analyzer = Callable[[AnalysisInput], list[Finding]]

ANALYZERS: tuple[tuple[str, Analyzer], ...] = (
    ("recompilation", recompilation.analyze),
    ("graph_break", graph_break.analyze),
    ("host_sync", host_sync.analyze),
    ("aten_fallback", aten_fallback.analyze),
    ("slow_compile", slow_compile.analyze),
    ("tracing_bound", tracing_bound.analyze),
    ("unrolled_loop", unrolled_loop.analyze),
    ("memory_pressure", memory_pressure.analyze),
)


def run_analyzers(data: AnalysisInput) -> list[Finding]:
    """All findings for ``data``, most severe first (stable within a severity)."""
    findings: list[Finding] = []
    for _name, analyzer in ANALYZERS:
        findings.extend(analyzer(data))
    return sorted(findings, key=lambda f: -f.severity.rank)


__all__ = ["ANALYZERS", "AnalysisInput", "run_analyzers"]
