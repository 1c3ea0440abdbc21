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

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from xlaprof.findings import Location
from xlaprof.model.input import AnalysisInput
from xlaprof.parse.debug_log import DebugEvent, FallbackRecord
from xlaprof.parse.frames import Frame, is_library_file, user_location
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
    # Per user line, its read sites: the library frame that reads (None: the user's own line)
    # with the reads made there, the executions they forced, and the CPU-fallback op whose
    # input copy is the read (None for ``.item()``-like reads).
    read_sites: dict[Location, dict[Frame | None, ReadSite]] = field(
        default_factory=lambda: defaultdict(dict)
    )


@dataclass
class ReadSite:
    """One place that reads a device value on the host, under one user line."""

    frame: Frame | None  # the library's frame that reads; None where the user's line reads
    item_calls: int = 0  # ``.item()``-like calls (the tracker's ``_local_scalar_dense``)
    forced: list[DebugEvent] = field(default_factory=list)  # executions its reads forced
    fallback_op: str | None = None  # a CPU fallback whose input copy is the read
    fallback_calls: int = 0
    steps: set[int] = field(default_factory=set)

    @property
    def reads(self) -> int:
        """Reads at the site: each call reads once, and a call on a pending value forces one
        execution (counted once, whichever source saw it)."""
        return max(self.item_calls, len(self.forced), self.fallback_calls)


def _read_site(sites: Sites, location: Location, frames: list[Frame]) -> ReadSite:
    frame = library_frame(frames)
    found = sites.read_sites[location].get(frame)
    if found is None:
        found = sites.read_sites[location][frame] = ReadSite(frame)
    return found


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


# torch_xla's own code that syncs on the device with no read: the debug analysis guesses
# "user code trying to access tensor value" for any execution it cannot name, but these copy
# nothing to the host (``_xla_sync_multi`` materializing the helper's inputs).
_DEVICE_SYNCS = (
    ("torch_xla/experimental/gradient_accumulation.py", "_gradient_accumulation_impl"),
)


def _device_sync(event: DebugEvent) -> bool:
    """Whether ``event``'s innermost frame is one of torch_xla's device-side syncs."""
    frame = next((f for f in event.frames if f.file), None)
    if frame is None or frame.file is None:
        return False
    file = frame.file.replace("\\", "/")
    return any(file.endswith("/" + path) and frame.function == name for path, name in _DEVICE_SYNCS)


def _forced_reads(data: AnalysisInput, sites: Sites) -> Counter[Location]:
    """Executions a host read forced, per user line (noted in ``sites`` with their steps)."""
    reads = [r for r in data.debug.fallbacks if r.op == HOST_SYNC_OP]
    index: dict[int, dict[tuple[tuple[str | None, int | None], ...], Location]] = {}
    access: Counter[Location] = Counter()
    for event in data.debug.executions():
        if event.cause and TENSOR_ACCESS_CAUSE in event.cause and not _device_sync(event):
            location = user_location(event.frames) or _tracked_location(event.frames, reads, index)
            if location is not None:
                access[location] += 1
                sites.forced[location].append(event)
                _note_read(sites, location, event.step, event.frames)
                site = _read_site(sites, location, event.frames)
                site.forced.append(event)
                if event.step is not None:
                    site.steps.add(event.step)
    return access


def counter_spelling(data: AnalysisInput) -> dict[str, str]:
    """The metrics counters' name for each op the fallback tracker spells otherwise.

    The tracker names an op by its C++ operator struct (``at::_ops::isin_Tensor_Tensor``: name
    and overload joined by ``_``), the counters by its schema (``aten::isin.Tensor_Tensor``).
    Both name one op: the counter's spelling is kept, so the op is reported once.
    """
    spelling = {}
    for name in data.aten_counters():
        if "." in name:
            spelling[name.replace(".", "_", 1)] = name
    return spelling


def _tracked_calls(data: AnalysisInput, sites: Sites) -> Counter[Location]:
    """The ``.item()`` calls per user line; fallback calls go into ``sites`` (placed per op and
    line, or, for ``Op(s) not lowered`` lines, unplaced per op)."""
    scalar: Counter[Location] = Counter()
    spelling = counter_spelling(data)
    for record in data.debug.fallbacks:
        location = user_location(record.frames)
        if record.op is None:
            continue
        op = spelling.get(record.op, record.op)
        if location is None:
            if record.listed:
                sites.unplaced[op] += record.count
        elif op == HOST_SYNC_OP:
            scalar[location] += record.count
            _note_read(sites, location, record.step, record.frames)
            site = _read_site(sites, location, record.frames)
            site.item_calls += record.count
            if record.step is not None:
                site.steps.add(record.step)
        else:
            sites.fallbacks[op][location] += record.count
            site = _read_site(sites, location, record.frames)
            site.fallback_op = op
            site.fallback_calls += record.count
    return scalar


# torch and torch_xla frames are the read's mechanism (``Tensor.item``, ``mesh_reduce``), not the
# code that asked for it: the library named is the innermost frame outside them.
_RUNTIME_RE = re.compile(r"[/\\](torch|torch_xla|typing_extensions\.py)([/\\]|$)")
# Parts of torch that read on the host on their own, like a library: torch.distributions
# checks its arguments and samples (``constraint.check(value).all()``) unless told not to.
_TORCH_LIBRARY_RE = re.compile(r"[/\\]torch[/\\]distributions[/\\]")
_PACKAGE_RE = re.compile(r"[/\\](?:site|dist)-packages[/\\](.+)$")


def library_frame(stack: list[Frame]) -> Frame | None:
    """The innermost frame of ``stack`` in an installed library other than torch/torch_xla
    (torch.distributions counts as one: its validation reads on its own), if it comes before
    (inside) the user's first frame; None for a read in the user's code."""
    for frame in stack:
        if frame.file is None or frame.line is None:
            continue
        if not is_library_file(frame.file):
            return None  # the user's own line reads
        below = below_packages(frame.file)
        if _PACKAGE_RE.search(frame.file) and (
            not _RUNTIME_RE.search(below) or _TORCH_LIBRARY_RE.search(below)
        ):
            return frame
    return None


def below_packages(file: str) -> str:
    """``file`` below site-packages (``/transformers/masking_utils.py``), or ``file``."""
    match = _PACKAGE_RE.search(file)
    return "/" + match.group(1).replace("\\", "/") if match else file


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
