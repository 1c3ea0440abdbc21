"""CPU fallbacks: ``aten::`` ops with no XLA lowering, run on the host instead.

Every fallback copies its inputs device→host, runs on the CPU and copies the result back, and
cuts the graph in two. The ``aten::`` counters say which ops and how often; the fallback tracker
(``XLA_FNTRACKER_FILE``, set by ``xlaprof run``) or the profiler's Unlowered Op summary say where.
``aten::_local_scalar_dense`` is ``.item()``: reported as a host sync, not here.

A pasted log of ``pt-xla-profiler: Op(s) not lowered: aten::median`` lines (``PT_XLA_DEBUG=1``)
names the op but neither its line nor its calls (torch_xla prints the line at every sync from
the op's first fallback on): the op is reported unlocated, with the number of lines, and the
fix says how to get its line.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from xlaprof.analyzers.shared.sites import attribute
from xlaprof.findings import Finding, Kind, Severity
from xlaprof.model.input import AnalysisInput

# Op-specific advice where a lowered replacement is well known.
_HINTS = {
    "aten::nonzero": "nonzero has a data-dependent output shape; use a fixed-shape mask "
    "(torch.where(cond, x, 0)) instead of indexing with it.",
    "aten::masked_select": "masked_select has a data-dependent output shape; multiply by the "
    "mask or use torch.where to keep shapes fixed.",
    "aten::unique": "unique has a data-dependent output shape; compute it outside the step or "
    "use a fixed-size one_hot/scatter representation.",
    "aten::bincount": "bincount can be written as zeros(n).scatter_add_(0, idx, ones) with a "
    "fixed n, which lowers.",
    "aten::histc": "histc can be written with bucketize-free arithmetic and scatter_add_ into a "
    "fixed number of bins, which lowers.",
    "aten::median": "median can often be replaced by torch.sort(x).values at the middle index, "
    "which lowers.",
}
SUGGESTION = (
    "Replace the op with one that lowers to XLA, move it out of the training step, or ask for a "
    "lowering in a pytorch/xla issue. Each call runs on the CPU with a device→host→device copy."
)
UNPLACED_NOTE = (
    " The `Op(s) not lowered` lines carry no source line: run the script under `xlaprof run` "
    "(its fallback tracker records each call's stack) to see where the op is called."
)
_MAX_SITES = 5


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not have looked at ``data`` (no fallback counts), or None."""
    if data.reports or data.steps or data.debug.events or data.debug.fallbacks:
        return None
    return "no metrics, per-step rows or debug events in the input"


def analyze(data: AnalysisInput) -> list[Finding]:
    counts: dict[str, int | None] = dict(data.aten_fallbacks())
    attributed = attribute(data)
    for op, where in attributed.fallbacks.items():
        if counts.get(op) is None:
            counts[op] = sum(where.values())
    per_step: dict[str, list[int]] = defaultdict(list)
    for row in data.steps:
        for op, value in row.aten.items():
            if value:
                per_step[op].append(row.step)

    findings = []
    for op, count in counts.items():
        if count == 0:
            continue
        where = attributed.fallbacks.get(op, Counter())
        location = where.most_common(1)[0][0] if where else None
        evidence: dict[str, object] = {"op": op, "count": count}
        if where:
            evidence["sites"] = {str(loc): n for loc, n in where.most_common(_MAX_SITES)}
            evidence["forces_host_sync"] = True
            evidence["location_source"] = (
                "inferred: host reads at this line match the op's call count"
                if op in attributed.inferred
                else "fallback tracker"
            )
        if per_step.get(op):
            evidence["steps_with_fallback"] = len(per_step[op])
        hint = _HINTS.get(op)
        findings.append(
            Finding(
                kind=Kind.ATEN_FALLBACK,
                severity=Severity.WARNING,
                title=f"{op} runs on the CPU ({count} calls)",
                evidence=evidence,
                location=location,
                suggestion=f"{hint} {SUGGESTION}" if hint else SUGGESTION,
            )
        )
    findings += _unplaced(attributed.unplaced, counts)
    return findings


def _unplaced(unplaced: Counter[str], counts: dict[str, int | None]) -> list[Finding]:
    """Ops named only in ``Op(s) not lowered`` lines (not counted from better evidence)."""
    findings = []
    for op, lines in unplaced.items():
        if op in counts:
            continue  # counted (and placed, where it could be) from better evidence
        hint = _HINTS.get(op)
        findings.append(
            Finding(
                kind=Kind.ATEN_FALLBACK,
                severity=Severity.WARNING,
                title=f"{op} does not lower: named in {lines} `Op(s) not lowered` line"
                + ("s" if lines != 1 else ""),
                evidence={
                    "op": op,
                    "count": None,  # calls: the lines do not count them
                    "not_lowered_lines": lines,
                    "location_source": None,
                },
                location=None,
                suggestion=(f"{hint} " if hint else "") + SUGGESTION + UNPLACED_NOTE,
            )
        )
    return findings
