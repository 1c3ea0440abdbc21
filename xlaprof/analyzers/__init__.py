"""Analyzers: pure functions from parsed data to ``Finding``s, one module per finding kind.

Each analyzer module has ``analyze(data) -> list[Finding]`` and owns its precondition,
``unmeasured(data) -> str | None``: why it could not have looked at this input (no compilation
data, too few steady steps, no compiled graphs, ...), or None when it could. An analyzer that
found nothing on an input it could not read has not shown the problem is absent: ``xlaprof
check --forbid KIND`` says "not measured" there rather than "pass".

``ANALYZERS`` is the one registry, in the order findings are made; ``run_analyzers`` applies
them all and sorts the findings most severe first. Analyzers take an ``AnalysisInput`` and never
read files. A new finding kind is a module here, a line in ``ANALYZERS``, a ``Kind`` in
``xlaprof.findings`` and a page in docs/analyzers/.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xlaprof.analyzers import (
    async_wait,
    aten_fallback,
    collective_bound,
    compile_in_step,
    eager_mode,
    graph_break,
    host_bound,
    host_sync,
    input_bound,
    memory_pressure,
    recompilation,
    slow_compile,
    tracing_bound,
    unrolled_loop,
)
from xlaprof.findings import Finding, Kind
from xlaprof.model.input import AnalysisInput


@dataclass(frozen=True)
class Analyzer:
    """One finding kind: how it is found, and when it cannot be."""

    kind: Kind
    analyze: Callable[[AnalysisInput], list[Finding]]
    unmeasured: Callable[[AnalysisInput], str | None]


ANALYZERS: tuple[Analyzer, ...] = (
    Analyzer(Kind.RECOMPILATION, recompilation.analyze, recompilation.unmeasured),
    Analyzer(Kind.GRAPH_BREAK, graph_break.analyze, graph_break.unmeasured),
    Analyzer(Kind.HOST_SYNC, host_sync.analyze, host_sync.unmeasured),
    Analyzer(Kind.ATEN_FALLBACK, aten_fallback.analyze, aten_fallback.unmeasured),
    Analyzer(Kind.SLOW_COMPILE, slow_compile.analyze, slow_compile.unmeasured),
    Analyzer(Kind.TRACING_BOUND, tracing_bound.analyze, tracing_bound.unmeasured),
    Analyzer(Kind.UNROLLED_LOOP, unrolled_loop.analyze, unrolled_loop.unmeasured),
    Analyzer(Kind.MEMORY_PRESSURE, memory_pressure.analyze, memory_pressure.unmeasured),
    # From a profiler capture's per-step bottlenecks (tables/device/bottleneck.py).
    Analyzer(Kind.INPUT_BOUND, input_bound.analyze, input_bound.unmeasured),
    Analyzer(Kind.COLLECTIVE_BOUND, collective_bound.analyze, collective_bound.unmeasured),
    Analyzer(Kind.ASYNC_WAIT, async_wait.analyze, async_wait.unmeasured),
    Analyzer(Kind.HOST_BOUND, host_bound.analyze, host_bound.unmeasured),
    Analyzer(Kind.COMPILE_IN_STEP, compile_in_step.analyze, compile_in_step.unmeasured),
    Analyzer(Kind.EAGER_MODE, eager_mode.analyze, eager_mode.unmeasured),
)


def analyzer_of(kind: Kind) -> Analyzer:
    """The registered analyzer of ``kind``."""
    return next(a for a in ANALYZERS if a.kind is kind)


def run_analyzers(data: AnalysisInput) -> list[Finding]:
    """All findings for ``data``, most severe first (stable within a severity)."""
    findings: list[Finding] = []
    for analyzer in ANALYZERS:
        findings.extend(analyzer.analyze(data))
    return sorted(findings, key=lambda f: -f.severity.rank)


__all__ = ["ANALYZERS", "AnalysisInput", "Analyzer", "analyzer_of", "run_analyzers"]
