"""Ranks whose torch.compile compiles diverge: one process of a job compiled what the others
did not (per-rank TORCH_TRACE logs, ``AnalysisInput.torch_traces``).

In a job whose ranks meet in collectives, a rank that compiles while the others wait makes
every rank wait; and a rank whose inputs differ (a shorter last batch on one rank, data split
unevenly) keeps recompiling where the others do not. One finding names the ranks that differ
from the most common count, per compiled function, with the guard failures of their extra
compiles.
"""

from __future__ import annotations

from collections import Counter

from xlaprof.analyzers.recompilation.advice import MAX_LISTED
from xlaprof.findings import Finding, Kind, Location, Severity
from xlaprof.model.input import AnalysisInput
from xlaprof.parse.torch_trace import TorchTraceLog, reason_text

SUGGESTION = (
    "Give every rank the same shapes and values at the compiled function: split data so each "
    "rank gets full batches (drop_last=True, a DistributedSampler with even shards), pad the "
    "last batch, and keep Python values the function reads equal across ranks; or mark the "
    "changing dimension dynamic (torch._dynamo.mark_dynamic) on every rank."
)


def from_ranks(data: AnalysisInput) -> list[Finding]:
    """The finding for ranks whose compile counts differ, or none (one rank, or all alike)."""
    logs = [log for log in data.torch_traces if log.rank is not None]
    if len({log.rank for log in logs}) < 2:
        return []
    counts = {log.rank: _per_function(log) for log in logs}
    functions = sorted({f for per in counts.values() for f in per})
    differing: dict[str, dict[str, int]] = {}
    odd_ranks: set[int] = set()
    for function in functions:
        per_rank = {rank: per.get(function, 0) for rank, per in counts.items() if rank is not None}
        usual = Counter(per_rank.values()).most_common(1)[0][0]
        odd = {rank: n for rank, n in per_rank.items() if n != usual}
        if odd:
            differing[function] = {"usual": usual, **{f"rank {r}": n for r, n in odd.items()}}
            odd_ranks.update(odd)
    if not differing:
        return []
    reasons = [
        f"rank {log.rank} {c.compile_id} {c.function or '?'}: {reason_text(c.recompile_reasons[0])}"
        for log in logs
        if log.rank in odd_ranks
        for c in log.compiles
        if c.recompile_reasons
    ]
    first = next(
        (c for log in logs if log.rank in odd_ranks for c in log.compiles if c.recompile_reasons),
        None,
    )
    # The compiled function itself: dynamo's logged stack may skip the frame that called it.
    location = Location.parse(first.code) if first is not None and first.code else None
    return [
        Finding(
            kind=Kind.RECOMPILATION,
            severity=Severity.WARNING,
            title=(
                f"torch.compile compiles differ across ranks: rank"
                f"{'s' if len(odd_ranks) > 1 else ''} {', '.join(map(str, sorted(odd_ranks)))} "
                f"compiled "
                f"{', '.join(differing)} a different number of times than the others"
            ),
            evidence={
                "ranks": len(counts),
                "compiles_per_rank": {
                    f"rank {rank}": sum(per.values()) for rank, per in sorted(counts.items())
                },
                "differing": differing,
                "their_recompile_reasons": reasons[:MAX_LISTED],
            },
            location=location,
            suggestion=SUGGESTION,
        )
    ]


def _per_function(log: TorchTraceLog) -> dict[str, int]:
    """Compiles per compiled function (its code, or its name where the log has no code)."""
    counts: Counter[str] = Counter()
    for compile_ in log.compiles:
        counts[compile_.function or compile_.code or f"frame {compile_.frame_id}"] += 1
    return dict(counts)
