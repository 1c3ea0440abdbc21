"""Where in the user's code host reads and CPU fallbacks happen: one attribution for all.

The host-sync and fallback analyzers must agree on which line is which, or one line is reported
twice. Sources, best first:
* the fallback tracker (``XLA_FNTRACKER_FILE``): each fallback call with its op and frames;
* executions caused by "user code trying to access tensor value", grouped by user line. A CPU
  fallback reads its input on the host too, so such a line is taken to be a fallback's when
  ``.item()`` calls (``aten::_local_scalar_dense``) cannot explain its reads and exactly one
  fallback op was called that many times. The attribution is marked as inferred.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from xlaprof.findings import Location
from xlaprof.model.input import HOST_SYNC_OP, AnalysisInput
from xlaprof.parse.frames import user_location

_TENSOR_ACCESS_CAUSE = "access tensor value"


@dataclass
class Sites:
    """Host reads per line (not fallbacks), and fallback calls per op and line."""

    reads: Counter[Location] = field(default_factory=Counter)
    fallbacks: dict[str, Counter[Location]] = field(default_factory=lambda: defaultdict(Counter))
    inferred: set[str] = field(default_factory=set)  # ops located by count matching


def attribute(data: AnalysisInput) -> Sites:
    sites = Sites()
    access: Counter[Location] = Counter()
    for event in data.debug.executions():
        if event.cause and _TENSOR_ACCESS_CAUSE in event.cause:
            location = user_location(event.frames)
            if location is not None:
                access[location] += 1
    scalar: Counter[Location] = Counter()
    for record in data.debug.fallbacks:
        location = user_location(record.frames)
        if location is None or record.op is None:
            continue
        if record.op == HOST_SYNC_OP:
            scalar[location] += record.count
        else:
            sites.fallbacks[record.op][location] += record.count
    tracked = {loc for counter in sites.fallbacks.values() for loc in counter}
    for location, count in access.items():
        if location not in tracked:
            sites.reads[location] = count
    for location, count in scalar.items():
        # An .item() on a pending tensor shows in both sources: count it once.
        sites.reads[location] = max(sites.reads[location], count)
    _infer_fallback_lines(data, sites, scalar)
    return sites


def _infer_fallback_lines(data: AnalysisInput, sites: Sites, scalar: Counter[Location]) -> None:
    untracked = {
        op: count
        for op, count in data.aten_fallbacks().items()
        if count and op not in sites.fallbacks
    }
    if not untracked:
        return
    item_calls = data.aten_counters().get(HOST_SYNC_OP) or 0
    for location, count in list(sites.reads.items()):
        if location in scalar or count <= item_calls:
            continue
        matching = [op for op, calls in untracked.items() if calls == count]
        if len(matching) == 1:
            op = matching[0]
            sites.fallbacks[op][location] = count
            sites.inferred.add(op)
            del sites.reads[location]
            del untracked[op]
