"""One row per ``torch.compile`` compile of a TORCH_TRACE log: what it compiled, how long it
took, why (the guard that failed), its graph breaks and cache results, and the step it fell in
where a capture of the same run places it (``tables.host_steps.place_compiles``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.model.result import CompileSummary
    from xlaprof.parse.dynamo_log import DynamoRecord
    from xlaprof.parse.torch_trace import TorchTraceLog

COMPILE_COLUMNS = [
    "rank",
    "compile_id",
    "function",
    "code",
    "step",
    "seconds",
    "backend_seconds",
    "recompile_reason",
    "graph_breaks",
    "cache_hits",
    "cache_misses",
    "failed",
]


def compile_table(logs: list[TorchTraceLog], records: list[DynamoRecord]) -> pd.DataFrame:
    """Every log's compiles (``COMPILE_COLUMNS``), in log order; seconds None where the log
    has no compilation metrics for a compile (it ended before they were written)."""
    import pandas as pd

    steps = {r.compile_id: r.step for r in records if r.kind == "compile"}
    rows = []
    for index, log in enumerate(logs):
        for compile_ in log.compiles:
            hits = sum(v for k, v in compile_.cache.items() if k.endswith("_cache_hit"))
            misses = sum(v for k, v in compile_.cache.items() if k.endswith("_cache_miss"))
            rows.append(
                {
                    "rank": log.rank,
                    "compile_id": compile_.compile_id,
                    "function": compile_.function,
                    "code": compile_.code,
                    "step": steps.get(compile_.compile_id) if index == 0 else None,
                    "seconds": compile_.seconds,
                    "backend_seconds": compile_.backend_seconds,
                    "recompile_reason": compile_.recompile_reasons[0]
                    if compile_.recompile_reasons
                    else None,
                    "graph_breaks": len(compile_.graph_breaks),
                    "cache_hits": hits if compile_.cache else None,
                    "cache_misses": misses if compile_.cache else None,
                    "failed": compile_.fail_type,
                }
            )
    frame = pd.DataFrame(rows, columns=COMPILE_COLUMNS)
    return frame.astype({"step": "Int64", "cache_hits": "Int64", "cache_misses": "Int64"})


def compile_summary(table: pd.DataFrame) -> CompileSummary:
    """The compile table's totals as the reports head it (``CompileSummary``): those of the
    first rank's compiles (every rank's where the logs name none)."""
    from xlaprof.model.result import CompileSummary

    ranks = table["rank"].dropna().unique()
    rank = int(ranks.min()) if len(ranks) else None
    first = table[table["rank"] == rank] if rank is not None else table
    seconds = first["seconds"].dropna()
    hits = first["cache_hits"].dropna()
    misses = first["cache_misses"].dropna()
    failed = first[first["failed"].notna()]
    return CompileSummary(
        rank=rank,
        ranks=len(ranks),
        compiles=len(first),
        recompiles=int(first["recompile_reason"].notna().sum()),
        graph_breaks=int(first["graph_breaks"].sum()),
        seconds=float(seconds.sum()) if len(seconds) else None,
        cache_hits=int(hits.sum()) if len(hits) else None,
        cache_misses=int(misses.sum()) if len(misses) else None,
        failed=len(failed),
        failed_kinds=sorted({str(kind) for kind in failed["failed"]}),
    )
