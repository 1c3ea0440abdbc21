"""Graph breaks: ``torch.compile`` could not trace a line, so it split the function there.

Each break ends one compiled graph and starts another, with the code between run eagerly (on
an XLA device: traced lazily, op by op); a break on a tensor value (``if loss > 0``) also reads
the value on the host. Dynamo says where and why (its ``graph_breaks`` log, recorded in
``dynamo.jsonl`` by ``xlaprof run`` and ``profile()``): one finding per line and reason, with
dynamo's own hints.
"""

from __future__ import annotations

import re
from collections import defaultdict

from xlaprof.findings import Finding, Kind, Location, Severity
from xlaprof.model.input import AnalysisInput
from xlaprof.parse.dynamo_log import DynamoRecord

_HINT_RE = re.compile(r"^\s*Hint:\s*(.+)$", re.MULTILINE)
_MAX_LISTED = 8

SUGGESTION = (
    "Remove the break so the function compiles as one graph: keep Python control flow off "
    "tensor values (torch.where, torch.cond), avoid .item()/.tolist()/print of tensors inside "
    "the compiled function, and move unsupported calls out of it. Set "
    "torch.compile(..., fullgraph=True) to make any break an error while fixing them."
)


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not have looked at ``data`` (an empty input), or None."""
    if data.reports or data.steps or data.debug.events or data.dynamo or data.torch_traces:
        return None
    return "the input is empty"


def analyze(data: AnalysisInput) -> list[Finding]:
    breaks: dict[tuple[str | None, str | None], list[DynamoRecord]] = defaultdict(list)
    for record in data.dynamo:
        if record.kind == "graph_break":
            breaks[(record.code, record.reason)].append(record)
    findings = []
    for (code, reason), records in breaks.items():
        hints = list(dict.fromkeys(h for r in records for h in _HINT_RE.findall(r.message)))
        calls = list(dict.fromkeys(r.user_frames[-1] for r in records if r.user_frames))
        evidence: dict[str, object] = {
            "reason": reason,
            "breaks": len(records),
            "steps": sorted({r.step for r in records if r.step is not None})[:_MAX_LISTED],
            "dynamo_hints": hints[:_MAX_LISTED],
            "called_from": calls[:_MAX_LISTED],
        }
        findings.append(
            Finding(
                kind=Kind.GRAPH_BREAK,
                severity=Severity.WARNING,
                title=f"torch.compile graph break: {reason or 'reason not given'}",
                evidence=evidence,
                location=_location(code),
                suggestion=" ".join([*hints[:2], SUGGESTION]) if hints else SUGGESTION,
            )
        )
    return findings


def _location(text: str | None) -> Location | None:
    return Location.parse(text) if text else None
