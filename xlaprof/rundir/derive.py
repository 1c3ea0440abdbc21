"""Derived files of a finished run: ``events.jsonl`` and the graph index's hashes and shapes.

They repeat what ``debug.log`` and ``graphs/`` hold in an easier form for other tools; xlaprof
itself reads the raw files. Written once when a run ends (parsing debug.log once).
"""

from __future__ import annotations

import json

from xlaprof.rundir.reader import Run, link_graphs
from xlaprof.rundir.schema import EVENTS, GRAPH_INDEX, GRAPHS_DIR
from xlaprof.rundir.writer import atomic_write_text


def write_derived(run: Run, graphs: bool = True) -> None:
    """Write ``events.jsonl`` and, with ``graphs``, complete ``graphs/index.jsonl``."""
    lines = [json.dumps(event.record()) for event in run.debug_log().events]
    atomic_write_text(run.path / EVENTS, "".join(line + "\n" for line in lines))
    if graphs:
        _describe_graphs(run)


def _describe_graphs(run: Run) -> None:
    """Add each kept graph's hash, op count and parameter shapes to graphs/index.jsonl."""
    entries = sorted(run.graph_index(), key=lambda e: e.get("order", 0))
    graphs = run.graphs()
    if not entries or len(entries) != len(graphs):
        return
    link_graphs(graphs, run.debug_log().compilations())
    for entry, graph in zip(entries, graphs, strict=True):
        entry["graph_hash"] = graph.graph_hash
        if graph.hlo is not None:
            entry["op_count"] = graph.hlo.op_count
            entry["parameters"] = [p.shape for p in graph.hlo.parameters]
    lines = "".join(json.dumps(entry) + "\n" for entry in entries)
    atomic_write_text(run.path / GRAPHS_DIR / GRAPH_INDEX, lines)
