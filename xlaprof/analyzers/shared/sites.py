"""Where in the user's code host reads and CPU fallbacks happen: one attribution for all.

The host-sync and fallback analyzers must agree on which line is which, or one line is reported
twice. Sources, best first:
* the fallback tracker (``XLA_FNTRACKER_FILE``): each fallback call with its op and frames;
* executions caused by "user code trying to access tensor value", grouped by user line. A CPU
  fallback reads its input on the host too, so such a line is taken to be a fallback's when
  ``.item()`` calls (``aten::_local_scalar_dense``) cannot explain its reads and exactly one
  fallback op was called that many times. The attribution is marked as inferred.

PT_XLA_DEBUG prints only the innermost frames of an execution (8 unless
``PT_XLA_DEBUG_MAX_FRAME`` says more, as ``xlaprof run`` now does): a read deep inside a library
(transformers' mask helpers) may show no user frame there. The fallback tracker's
``_local_scalar_dense`` record of the same read has the whole stack, so such an execution is
placed at the user line of the tracker record whose innermost frames it shares.
The ``Op(s) not lowered`` lines of a pasted log have no frame at all: they are counted per op,
unplaced.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from xlaprof.findings import Location
from xlaprof.model.input import AnalysisInput
from xlaprof.parse.debug_log import DebugEvent, FallbackRecord
from xlaprof.parse.frames import Frame, user_location
from xlaprof.parse.metrics_report import HOST_SYNC_OP

# The cause torch_xla's debug analysis gives a sync made to read a tensor's value.
TENSOR_ACCESS_CAUSE = "access tensor value"


@dataclass
class Sites:
    """Host reads per line (not fallbacks), and fallback calls per op and line."""

    reads: Counter[Location] = field(default_factory=Counter)
    fallbacks: dict[str, Counter[Location]] = field(default_factory=lambda: defaultdict(Counter))
    inferred: set[str] = field(default_factory=set)  # ops located by count matching
    # the steps holding a read at each line, where the input knows steps (a run directory)
    read_steps: dict[Location, set[int]] = field(default_factory=lambda: defaultdict(set))
    # the longest stack seen for a read at each line, innermost frame first
    read_stacks: dict[Location, list[Frame]] = field(default_factory=dict)
    # executions a read forced, in log order, by the line that read
    forced: dict[Location, list[DebugEvent]] = field(default_factory=lambda: defaultdict(list))
    # per op, the "Op(s) not lowered" lines naming it (no frame, no call count: a pasted log)
    unplaced: Counter[str] = field(default_factory=Counter)


def attribute(data: AnalysisInput) -> Sites:
    sites = Sites()
    access = _forced_reads(data, sites)
    scalar = _tracked_calls(data, sites)
    tracked = {loc for counter in sites.fallbacks.values() for loc in counter}
    for location, count in access.items():
        if location not in tracked:
            sites.reads[location] = count
    for location, count in scalar.items():
        # An .item() on a pending tensor shows in both sources: count it once.
        sites.reads[location] = max(sites.reads[location], count)
    _infer_fallback_lines(data, sites, scalar)
    return sites


def _forced_reads(data: AnalysisInput, sites: Sites) -> Counter[Location]:
    """Executions a host read forced, per user line (noted in ``sites`` with their steps)."""
    reads = [r for r in data.debug.fallbacks if r.op == HOST_SYNC_OP]
    index: dict[int, dict[tuple[tuple[str | None, int | None], ...], Location]] = {}
    access: Counter[Location] = Counter()
    for event in data.debug.executions():
        if event.cause and TENSOR_ACCESS_CAUSE in event.cause:
            location = user_location(event.frames) or _tracked_location(event.frames, reads, index)
            if location is not None:
                access[location] += 1
                sites.forced[location].append(event)
                _note_read(sites, location, event.step, event.frames)
    return access


def _tracked_calls(data: AnalysisInput, sites: Sites) -> Counter[Location]:
    """The ``.item()`` calls per user line; fallback calls go into ``sites`` (placed per op and
    line, or, for ``Op(s) not lowered`` lines, unplaced per op)."""
    scalar: Counter[Location] = Counter()
    for record in data.debug.fallbacks:
        location = user_location(record.frames)
        if record.op is None:
            continue
        if location is None:
            if record.listed:
                sites.unplaced[record.op] += record.count
        elif record.op == HOST_SYNC_OP:
            scalar[location] += record.count
            _note_read(sites, location, record.step, record.frames)
        else:
            sites.fallbacks[record.op][location] += record.count
    return scalar


def _note_read(sites: Sites, location: Location, step: int | None, frames: list[Frame]) -> None:
    if step is not None:
        sites.read_steps[location].add(step)
    if len(frames) > len(sites.read_stacks.get(location, ())):
        sites.read_stacks[location] = frames


def _tracked_location(
    frames: list[Frame],
    reads: list[FallbackRecord],
    index: dict[int, dict[tuple[tuple[str | None, int | None], ...], Location]],
) -> Location | None:
    """The user line of the first ``.item()`` tracker record whose innermost frames are
    ``frames`` (a stack PT_XLA_DEBUG cut short), or None. ``index`` caches, per stack length,
    each record's innermost frames."""
    head = tuple((f.file, f.line) for f in frames)
    if not head:
        return None
    heads = index.get(len(head))
    if heads is None:
        heads = index[len(head)] = {}
        for record in reads:
            key = tuple((f.file, f.line) for f in record.frames[: len(head)])
            location = user_location(record.frames)
            if location is not None and len(key) == len(head):
                heads.setdefault(key, location)
    return heads.get(head)


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
