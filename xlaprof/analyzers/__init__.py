"""Analyzers: pure functions from parsed data to ``Finding``s, one module per finding kind.

Each analyzer module has ``analyze(data) -> list[Finding]`` and owns its precondition,
``unmeasured(data) -> str | None``: why it could not have looked at this input (no compilation
data, too few steady steps, no compiled graphs, ...), or None when it could. An analyzer that
found nothing on an input it could not read has not shown the problem is absent: ``xlaprof
check --forbid KIND`` says "not measured" there rather than "pass".

``ANALYZERS`` is the one registry, one entry per finding kind in the order findings are made:
its ``Kind``, its module's ``analyze`` and ``unmeasured``, its docs page
(docs/analyzers/<kind>.md) and its story answer (which bounds of a steady step it answers, and
why: ``story_answers``). ``run_analyzers`` applies them all and sorts the findings most severe
first. Analyzers take an ``AnalysisInput`` and never read files. A new finding kind is a
module here, its entry in ``ANALYZERS`` (with its ``Kind`` in ``xlaprof.findings``) and its
page in docs/analyzers/; ``tests/analyzers/test_registry.py`` checks that they agree.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType

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
from xlaprof.analyzers.shared.costs import StepCosts
from xlaprof.findings import Coverage, Finding, Kind, KindCoverage
from xlaprof.model.input import AnalysisInput


@dataclass(frozen=True)
class StoryAnswer:
    """When a kind answers what bounds the steady step (``xlaprof.tables.story``): the bounds
    it answers, each with its rank among the kinds that answer that bound (0 first: the most
    specific), and the sentence that says why the kind answers them."""

    bounds: Mapping[str, int]
    sentence: str


@dataclass(frozen=True)
class Analyzer:
    """One finding kind: how it is found, when it cannot be, where its docs page is and what
    it answers in the story."""

    kind: Kind
    analyze: Callable[[AnalysisInput], list[Finding]]
    unmeasured: Callable[[AnalysisInput], str | None]
    story: StoryAnswer
    # what the kind's findings cost the run, from the step model's figures: given all of
    # them that have no cost yet, it sets theirs (shared, where two point at the same
    # seconds, so costs add up); None: the kind sets its own cost, or has none
    price: Callable[[list[Finding], StepCosts], None] | None = None

    @property
    def docs(self) -> str:
        """Its page, from the repository's root."""
        return f"docs/analyzers/{self.kind.value}.md"

    @property
    def module(self) -> ModuleType:
        """The module that finds it (its ``analyze``)."""
        return sys.modules[self.analyze.__module__]


ANALYZERS: tuple[Analyzer, ...] = (
    Analyzer(
        Kind.RECOMPILATION,
        recompilation.analyze,
        recompilation.unmeasured,
        StoryAnswer({"compile": 1}, "graphs compiled again as their inputs change"),
        recompilation.price,
    ),
    Analyzer(
        Kind.GRAPH_BREAK,
        graph_break.analyze,
        graph_break.unmeasured,
        StoryAnswer({}, "no bound: a graph break's cost shows as compiling and tracing"),
    ),
    Analyzer(
        Kind.HOST_SYNC,
        host_sync.analyze,
        host_sync.unmeasured,
        StoryAnswer(
            {"transfer": 0, "tracing": 3},
            "the host reads device values mid-step, so it waits and traces again",
        ),
        host_sync.price,
    ),
    Analyzer(
        Kind.ATEN_FALLBACK,
        aten_fallback.analyze,
        aten_fallback.unmeasured,
        StoryAnswer({"transfer": 1}, "ops run on the CPU, their inputs copied off the device"),
    ),
    Analyzer(
        Kind.SLOW_COMPILE,
        slow_compile.analyze,
        slow_compile.unmeasured,
        StoryAnswer({"compile": 3}, "each compilation takes long"),
    ),
    Analyzer(
        Kind.TRACING_BOUND,
        tracing_bound.analyze,
        tracing_bound.unmeasured,
        StoryAnswer({"tracing": 0}, "the host traces the step slower than the device runs it"),
    ),
    Analyzer(
        Kind.UNROLLED_LOOP,
        unrolled_loop.analyze,
        unrolled_loop.unmeasured,
        StoryAnswer({"tracing": 2}, "a Python loop is traced op by op, unrolled into the graph"),
    ),
    Analyzer(
        Kind.MEMORY_PRESSURE,
        memory_pressure.analyze,
        memory_pressure.unmeasured,
        StoryAnswer({"device": 3}, "device memory is near full"),
    ),
    # From a profiler capture's per-step bottlenecks (tables/device/bottleneck.py).
    Analyzer(
        Kind.INPUT_BOUND,
        input_bound.analyze,
        input_bound.unmeasured,
        StoryAnswer({"input": 0, "host": 1, "transfer": 2}, "the device waits for input data"),
    ),
    Analyzer(
        Kind.COLLECTIVE_BOUND,
        collective_bound.analyze,
        collective_bound.unmeasured,
        StoryAnswer({"device": 2}, "the devices wait on collectives"),
    ),
    Analyzer(
        Kind.ASYNC_WAIT,
        async_wait.analyze,
        async_wait.unmeasured,
        StoryAnswer({"device": 1}, "the device waits on asynchronous copies"),
    ),
    Analyzer(
        Kind.HOST_BOUND,
        host_bound.analyze,
        host_bound.unmeasured,
        StoryAnswer({"host": 0}, "the device idles while the host works"),
    ),
    Analyzer(
        Kind.COMPILE_IN_STEP,
        compile_in_step.analyze,
        compile_in_step.unmeasured,
        StoryAnswer({"compile": 2}, "steps compile inside the traced window"),
    ),
    Analyzer(
        Kind.EAGER_MODE,
        eager_mode.analyze,
        eager_mode.unmeasured,
        StoryAnswer(
            {"compile": 0, "tracing": 1, "device": 0},
            "eager mode compiles and runs each op on its own",
        ),
    ),
)


def story_answers() -> dict[str, tuple[Kind, ...]]:
    """The finding kinds that answer each bound, most specific first (``worth_most``)."""
    ranked: dict[str, list[tuple[int, Kind]]] = {}
    for analyzer in ANALYZERS:
        for bound, rank in analyzer.story.bounds.items():
            ranked.setdefault(bound, []).append((rank, analyzer.kind))
    return {bound: tuple(kind for _, kind in sorted(kinds)) for bound, kinds in ranked.items()}


def answer_of(bound: str | None, kind: Kind) -> str | None:
    """Why ``kind`` answers ``bound`` (its story sentence), or None where it does not."""
    story = analyzer_of(kind).story
    return story.sentence if bound in story.bounds else None


def price(findings: list[Finding], costs: StepCosts) -> None:
    """Give the findings that have no cost the ones their kind's rule measures (``price`` of
    its registry entry), all of a kind's at once so that its rule can share the seconds two
    of them point at; a kind without a rule keeps what its analyzer set, else none."""
    for analyzer in ANALYZERS:
        pending = [f for f in findings if f.kind is analyzer.kind and f.cost is None]
        if pending and analyzer.price is not None:
            analyzer.price(pending, costs)


def analyzer_of(kind: Kind) -> Analyzer:
    """The registered analyzer of ``kind``."""
    return next(a for a in ANALYZERS if a.kind is kind)


def run_analyzers(data: AnalysisInput) -> list[Finding]:
    """All findings for ``data``, most severe first (stable within a severity)."""
    return examine(data)[0]


def examine(data: AnalysisInput) -> tuple[list[Finding], list[KindCoverage]]:
    """All findings for ``data``, most severe first (stable within a severity), and for each
    kind, in registry order, whether it found something, could look and found nothing, or
    could not look (its ``unmeasured`` reason)."""
    findings: list[Finding] = []
    coverage: list[KindCoverage] = []
    for analyzer in ANALYZERS:
        found = analyzer.analyze(data)
        findings.extend(found)
        if found:
            coverage.append(KindCoverage(analyzer.kind, Coverage.FOUND))
            continue
        why = analyzer.unmeasured(data)
        status = Coverage.NOTHING_FOUND if why is None else Coverage.NOT_MEASURED
        coverage.append(KindCoverage(analyzer.kind, status, why))
    return sorted(findings, key=lambda f: -f.severity.rank), coverage


__all__ = [
    "ANALYZERS",
    "AnalysisInput",
    "Analyzer",
    "StoryAnswer",
    "analyzer_of",
    "answer_of",
    "examine",
    "price",
    "run_analyzers",
    "story_answers",
]
