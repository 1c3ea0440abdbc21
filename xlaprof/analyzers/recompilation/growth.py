"""Graphs that grow: one site compiling larger and larger graphs, because nothing syncs.

A host read (``.item()``, ``bool(t)``, a CPU fallback) runs only what the value it reads needs,
and leaves every other pending tensor pending. In a loop with no sync, the state the loop
carries (a KV cache inside ``model.generate()``, weights updated in place through
``param.data``) is never materialized: each read's graph holds every iteration traced since the
start, and compiles anew, larger each time. What changes between two such graphs is not a
constant or a shape but the number of ops: ``model.generate()`` with the default cache compiles
705 -> 12,964-op graphs over 66 reads. The fix is a sync per iteration (per token), after which
each iteration's graph has one size.

Detection: a site's compilations grouped by the line that read (the innermost frame of the
compile's stack); a series of ``MIN_SERIES`` or more graphs whose op counts rise at every compile
and end at least ``MIN_GROWTH`` times the first is growth.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from dataclasses import dataclass

from xlaprof.parse.debug_log import DebugEvent
from xlaprof.rundir.schema import GraphInfo

MIN_SERIES = 3
MIN_GROWTH = 2.0
# What the fix text may name: transformers' generate loop, where a sync per token is made by a
# stopping criterion (transformers/generation/).
_GENERATE = re.compile(r"[/\\]transformers[/\\]generation[/\\]")


@dataclass(frozen=True)
class Growth:
    """The longest growing series of one site: where it read, the op counts in compile order."""

    read_at: str  # the reading frame, ``file:line`` (a library's line inside generate)
    function: str | None
    ops: tuple[int, ...]
    series: int  # how many growing series the site has (one per reading line)

    @property
    def in_generate(self) -> bool:
        return bool(_GENERATE.search(self.read_at))


def _op_count(graph: GraphInfo) -> int | None:
    if graph.hlo is None:
        return None
    return sum(1 for i in graph.hlo.instructions if i.opcode not in ("parameter", "constant"))


def _rising(counts: list[int]) -> bool:
    return (
        len(counts) >= MIN_SERIES
        and all(b > a for a, b in itertools.pairwise(counts))
        and counts[-1] >= MIN_GROWTH * counts[0]
    )


def find_growth(compiled: list[DebugEvent], graph_of: dict[int, GraphInfo]) -> Growth | None:
    """The site's growing series of graphs (the one that grows largest), or None."""
    by_reader: dict[tuple[str | None, int | None, str | None], list[int]] = defaultdict(list)
    for event in compiled:
        graph = graph_of.get(id(event))
        count = None if graph is None else _op_count(graph)
        if count is None or not event.frames:
            continue
        frame = event.frames[0]
        by_reader[(frame.file, frame.line, frame.function)].append(count)
    growing = [(reader, counts) for reader, counts in by_reader.items() if _rising(counts)]
    if not growing:
        return None
    (file, line, function), counts = max(growing, key=lambda rc: rc[1][-1])
    return Growth(f"{file}:{line}", function, tuple(counts), len(growing))
