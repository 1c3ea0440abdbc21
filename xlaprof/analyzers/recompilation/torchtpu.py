"""TorchTPU's fused-eager batches that missed its compile cache, with TorchTPU's reasons
(``torchtpu_eager_stablehlo`` records of a TORCH_TRACE log: ``cache_hit``, ``reason``,
``compile_failed``; ``xlaprof.parse.torch_trace``).

Every batch of ops fused eager mode compiles is looked up in TorchTPU's cache; a miss compiles
again. One finding per reason given, when a log's batches missed more than once for it. The
records are read by those keys, in the record or its JSON payload; no such record has been
seen here (TorchTPU writes them only with tensors on a TPU: docs/user-guide.md, "TorchTPU").
"""

from __future__ import annotations

from collections import Counter

from xlaprof.findings import Finding, Kind, Severity
from xlaprof.model.input import AnalysisInput

# A reason that made the cache miss this many times is a recompilation, not warm-up.
MIN_MISSES = 2

SUGGESTION = (
    "Keep each fused batch the same from step to step: the same shapes and dtypes (pad or "
    "bucket the changing dimension), no Python values that change inside the batch, and the "
    "same op order; a batch that differs every step compiles every step."
)


def from_torchtpu(data: AnalysisInput) -> list[Finding]:
    findings = []
    for log in data.torch_traces:
        batches = log.tpu_batches
        misses = [b for b in batches if b.cache_hit is False]
        reasons = Counter(b.reason or "no reason given" for b in misses)
        failed = sum(1 for b in batches if b.compile_failed)
        for reason, count in reasons.most_common():
            if count < MIN_MISSES:
                continue
            findings.append(
                Finding(
                    kind=Kind.RECOMPILATION,
                    severity=Severity.WARNING,
                    title=(
                        f"TorchTPU compiled {count} fused-eager batches again (cache miss): "
                        f"{reason}"
                    ),
                    evidence={
                        "rank": log.rank,
                        "batches": len(batches),
                        "cache_hits": sum(1 for b in batches if b.cache_hit),
                        "cache_misses": len(misses),
                        "misses_for_this_reason": count,
                        "compile_failed": failed,
                        "log": log.path,
                    },
                    suggestion=SUGGESTION,
                )
            )
    return findings
