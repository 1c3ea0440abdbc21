"""Host syncs: the host reads a device tensor (``.item()``, ``.cpu()``, ``print``) mid-step.

A read blocks the Python thread until the device has run everything the value depends on, so
tracing of the next step cannot overlap device work. Evidence comes from execution causes
("most likely user code trying to access tensor value"), from the fallback tracker's
``_local_scalar_dense`` records (each ``.item()`` with its whole stack), and from metrics
(``TransferFromDeviceTime`` samples, the ``aten::_local_scalar_dense`` counter).

A read *splits the step's graph* when the step's own graph ran after it and is not the graph
steps without the read run: the read cut the training graph in two. An evaluation read after
the step's sync runs only the evaluation's graph, and the next training graph is the usual one:
nothing was split, and such a read counts only when it happens in enough of the steps.
Reads inside a library (transformers' mask helpers) are named with the library's frame, and
the fix says what works from the user's side, as measured for the known ones.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from xlaprof.analyzers.shared.costs import StepCosts
from xlaprof.analyzers.shared.sites import (
    TENSOR_ACCESS_CAUSE,
    ReadSite,
    Sites,
    attribute,
    below_packages,
    library_frame,
)
from xlaprof.analyzers.shared.sourcecode import in_loop_over_data
from xlaprof.findings import Cost, Finding, Kind, Location, Severity
from xlaprof.model.input import FROM_DEVICE_METRICS, AnalysisInput
from xlaprof.parse.debug_log import DebugEvent
from xlaprof.parse.frames import LOADER_FILE, Frame, is_library_file
from xlaprof.parse.metrics_report import HOST_SYNC_OP

# Reading a value once or twice (a final loss print) is normal; from this many on, report it.
HOST_SYNC_MIN_COUNT = 3
# A read that splits no graph (the step already ran: it copies and waits) counts when the steps
# holding such a read are at least this share of the steps; a read that splits the step's graph
# always counts.
HOST_SYNC_MIN_STEP_SHARE = 0.5
# From this many reads (or one per step) it is a warning rather than a note.
HOST_SYNC_WARN_COUNT = 10

_CLOSURE_ADVICE = (
    " or log through xm.add_step_closure(...) so the read happens after torch_xla.sync() "
    "without stalling tracing"
)
SUGGESTION = (
    "Keep values on the device between steps: accumulate metrics in tensors and read them every "
    "N steps{closures}. Avoid .item(), .cpu(), .tolist() and print() of device tensors inside "
    "the step, and Python `if` on tensor values."
)
_CLOSURE_RUNNER = "_run_step_closures"
_CLOSURE_FUNCTIONS = ("_run_step_closures", "add_step_closure")


@dataclass(frozen=True)
class LibraryRead:
    """A host read some library makes on its own, and what its user can do about it."""

    path: str  # the file below site-packages, e.g. "transformers/masking_utils.py"
    function: str
    what: str
    fix: str


# Each fix was measured on torch_xla 2.9 (CPU) with transformers 5, counting the
# ``aten::_local_scalar_dense`` calls of one forward (see docs/analyzers/host_sync.md).
KNOWN_READS = (
    LibraryRead(
        "transformers/masking_utils.py",
        "_ignore_bidirectional_mask_sdpa",
        "checks `padding_mask.all()` on the host at every forward, to let SDPA skip an "
        "all-ones attention mask",
        "When a batch has no padding, pass no attention_mask (None means no padding). With "
        "padding, pass the mask as 4-D, `attention_mask[:, None, None, :].bool()"
        ".expand(-1, 1, seq_len, -1)`: transformers takes a 4-D mask as given, without the "
        'check (same logits). attn_implementation="eager" does not avoid it: the eager mask '
        "goes through the same check.",
    ),
    LibraryRead(
        "transformers/masking_utils.py",
        "_ignore_causal_mask_sdpa",
        "checks the padding mask with `.all()` on the host at every forward, to let SDPA use "
        "is_causal instead of a mask",
        'Build the model with attn_implementation="eager": its causal mask skips this check.',
    ),
    LibraryRead(
        "transformers/masking_utils.py",
        "find_packed_sequence_indices",
        "checks the position ids for packed sequences with `.all()` on the host at every "
        "forward that has no attention_mask and no cache",
        'Pass an attention_mask and build the model with attn_implementation="eager" (with '
        "SDPA, a mask only moves the read to the padding-mask check), or run with a KV cache "
        "(use_cache=True), which skips the check.",
    ),
    LibraryRead(
        "transformers/generation/stopping_criteria.py",
        "__call__",
        "is generate()'s EOS check: `torch.isin(new tokens, eos_token_id)` after every new "
        "token; isin has no XLA lowering, so it runs on the CPU and copies the tokens to the host",
        "generate() adds this check only when the generation config has an EOS id: with "
        "`model.generation_config.eos_token_id = None` it is gone (0 isin calls instead of one "
        "per token, measured with transformers 5 on the CPU), and every call generates "
        "max_new_tokens; cut the outputs at the EOS afterwards.",
    ),
    LibraryRead(
        "transformers/generation/utils.py",
        "__call__",
        "is generate()'s own loop deciding whether to stop: `unfinished_sequences.max() == 0` "
        "read on the host after every new token",
        "No generate() option removes this read: it is how generate() stops. To decode without "
        "it, write the loop yourself: a fixed number of tokens into a preallocated buffer (or "
        "transformers' static cache), torch_xla.sync() after each token, and finished sequences "
        "masked on the device instead of tested on the host.",
    ),
    LibraryRead(
        "transformers/models/mixtral/modeling_mixtral.py",
        "forward",
        "loops over the experts hit in Python, comparing each expert id on the host "
        '(MixtralExperts with experts_implementation="eager")',
        'Build the model with experts_implementation="batched_mm": fixed shapes, no host '
        "read, one graph per step.",
    ),
    # Measured on reinforce_episode (examples/realcode): 96 reads and 19 compiles in 4
    # episodes of 8 steps; with validate_args=False 32 reads (the actions) and 10 compiles.
    LibraryRead(
        "torch/distributions/distribution.py",
        "__init__",
        "validates the distribution's parameters when it is built: "
        "`constraint.check(value).all()` read on the host, a sync each time",
        "Build it with validate_args=False (Categorical(probs, validate_args=False)), or turn "
        "validation off for all distributions once: "
        "torch.distributions.Distribution.set_default_validate_args(False).",
    ),
    LibraryRead(
        "torch/distributions/distribution.py",
        "_validate_sample",
        "validates each value given to log_prob() against the support: "
        "`support.check(value).all()` read on the host, a sync each call",
        "Build the distribution with validate_args=False, or call "
        "torch.distributions.Distribution.set_default_validate_args(False) once.",
    ),
)


READ_BASIS = (
    "time in device-to-host reads (TransferFromDeviceTime: a read waits for the device to "
    "finish the graph, then copies)"
)


def price(findings: list[Finding], costs: StepCosts) -> None:
    """What the host's reads cost: the time the steps with device-to-host reads spent in them,
    per step (median over the steady steps with reads) and over the run. One read site takes
    it all (every read of the step is in it, whichever site made it); several take each its
    reads' share of all the run's reads (reads at the site / transfers), so the sites' costs
    add up to no more than the reads' time and reads no finding holds (an occasional log
    line) stay with no one. No cost where no step read, or where a site's reads are not
    counted (its share is unknown)."""
    import statistics

    reading = [r for r in costs.rows.values() if r.transfers_from_device > 0]
    if not findings or not reading:
        return
    run_s = sum(r.from_device_s for r in reading)
    steady = [r.from_device_s for r in reading if r.step >= costs.first_steady and r.compiles == 0]
    per_step = statistics.median(steady) if steady else None
    if len(findings) == 1:
        findings[0].cost = Cost(
            per_step_s=per_step,
            run_s=run_s,
            steps=len(reading),
            basis=READ_BASIS + ", all reads of the step",
        )
        return
    reads = [_count(f.evidence.get("reads_at_site")) for f in findings]
    if any(n is None for n in reads):
        return
    counted = [n or 0 for n in reads]
    transfers = max(sum(r.transfers_from_device for r in reading), sum(counted))
    for finding, count in zip(findings, counted, strict=True):
        share = count / transfers
        finding.cost = Cost(
            per_step_s=None if per_step is None else per_step * share,
            run_s=run_s * share,
            steps=_count(finding.evidence.get("steps_with_reads")) or len(reading),
            basis=(
                f"{READ_BASIS}, this site's share: {count} of the run's {transfers} reads "
                f"({share:.0%}; {len(findings)} read sites share the reads' time)"
            ),
        )


def _count(value: object) -> int | None:
    """A non-negative integer count from evidence, or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not have looked at ``data`` (no counts of reads), or None."""
    if data.reports or data.steps or data.debug.events or data.debug.fallbacks:
        return None
    return "no metrics, per-step rows or debug events in the input"


def analyze(data: AnalysisInput) -> list[Finding]:
    sites = attribute(data)
    metrics_evidence: dict[str, object] = {
        "device_to_host_transfers": data.device_to_host_transfers(),
        "local_scalar_dense": data.aten_counters().get(HOST_SYNC_OP),
        "steps": data.step_count(),
    }
    closures = _uses_step_closures(data, list(sites.reads))
    findings = [
        finding
        for location, count in sites.reads.most_common()
        if (finding := _site_finding(data, sites, location, count, metrics_evidence, closures))
    ]
    if findings or sites.reads:
        # Reads placed at lines are the best evidence: the counters must not report the reads
        # those lines were judged by (an occasional log line) once more without a line.
        return findings
    return _unplaced(data, metrics_evidence, closures)


def _site_finding(
    data: AnalysisInput,
    sites: Sites,
    location: Location,
    count: int,
    metrics_evidence: dict[str, object],
    closures: bool,
) -> Finding | None:
    """The finding for the reads at ``location`` (``count`` of them, or the sum over its read
    sites where their frames are known), or None when they are no problem."""
    steps = data.step_count()
    forced = sites.forced.get(location, [])
    stack = sites.read_stacks.get(location, [])
    listed = _listed_sites(sites, location)
    if listed:
        count = sum(site.reads for site in listed)
    if count < HOST_SYNC_MIN_COUNT or any(f.function == _CLOSURE_RUNNER for f in stack):
        return None  # a step closure's read is the one torch_xla recommends, after the graph ran
    split = _splits_step(data, forced, stack)
    holding = sites.read_steps.get(location)
    # steps holding a read, where steps are known; else the reads themselves
    share_count = len(holding) if holding else count
    looped = _reads_in_data_loop(data, location, count, holding)
    if not split and not looped and steps and share_count < HOST_SYNC_MIN_STEP_SHARE * steps:
        return None  # an occasional read of a finished step's value (a per-epoch log line)
    evidence: dict[str, object] = {"reads_at_site": count, **metrics_evidence}
    if holding:
        evidence["steps_with_reads"] = len(holding)
    cost = _seconds_per_execution(data)
    if listed:
        evidence["read_sites"] = [_site_evidence(site, location, cost) for site in listed]
    library = listed[0].frame if len(listed) == 1 else library_frame(stack) if not listed else None
    if library is not None:
        evidence["library_frame"] = f"{library.function} ({library.file}:{library.line})"
    title = _title(count, listed, library)
    if holding and steps and len(holding) <= steps:
        # (more steps with reads than steps recorded: a damaged steps.jsonl, which the run's
        # notes name; no share of steps is said then)
        title += f" in {len(holding)} of {steps} steps"
    if looped and not split:
        title += (
            f", {count // len(holding or {0})} per step in which it reads: once per "
            "iteration of a loop over data, each waiting for that iteration's graph"
        )
    evidence["splits_step_graph"] = split
    if split:
        title += _split_evidence(data, len(forced), evidence)
    suggestion = (
        _suggestion(library, _known(library), closures)
        if len(listed) <= 1
        else _per_site_suggestion(listed, closures)
    )
    return Finding(
        kind=Kind.HOST_SYNC,
        severity=_severity(count, steps),
        title=title,
        evidence=evidence,
        location=_read_location(
            location,
            [stack, *(e.frames for e in forced)],
            library is not None or (bool(listed) and all(s.frame is not None for s in listed)),
        ),
        suggestion=suggestion,
    )


def _read_location(location: Location, stacks: list[list[Frame]], in_library: bool) -> Location:
    """``location`` said as the read it is (the user's own, or a call whose library reads), in
    the function that holds it (from the frames that reached it: two reads in two functions are
    told apart by name, not only by line)."""
    function = next(
        (
            frame.function
            for frames in stacks
            for frame in frames
            if frame.file == location.file and frame.line == location.line and frame.function
        ),
        None,
    )
    where = (
        ""
        if function is None
        else ", at module level"
        if function == "<module>"
        else f", in {function}()"
    )
    what = (
        "your call into a library that reads a device value on the host"
        if in_library
        else "the line that reads a device value on the host"
    )
    return Location(location.file, location.line, what + where)


def _title(count: int, listed: list[ReadSite], library: Frame | None) -> str:
    """The finding's title: who reads, where, how often."""
    if library is not None:
        return (
            f"Host sync: {_package(library)} reads a device tensor on the host {count} "
            f"times, inside `{library.function}` ({_short(library)})"
        )
    if len(listed) > 1:
        places = ", ".join(f"{_label(site)} {site.reads}" for site in listed[:_MAX_SITES_TITLED])
        more = ", …" if len(listed) > _MAX_SITES_TITLED else ""
        return (
            f"Host sync: {count} host reads at {len(listed)} places below this line: {places}{more}"
        )
    return f"Host sync: a device tensor is read on the host {count} times"


# A read site is titled with at most this many places (the rest are in the evidence).
_MAX_SITES_TITLED = 4
# Reads per step that holds one, from which a read inside a loop over data (an evaluation
# loop's per-batch ``.item()``) counts even when few steps hold it.
LOOP_READS_PER_STEP = 2


def _reads_in_data_loop(
    data: AnalysisInput, location: Location, count: int, holding: set[int] | None
) -> bool:
    """Whether the reads at ``location`` happen once per iteration of a loop over data (several
    per step that holds them, at a line in a ``for`` loop over something not fixed): each waits
    for that iteration's graph, however rarely the loop runs (an evaluation loop)."""
    if not holding or count < LOOP_READS_PER_STEP * len(holding):
        return False
    return in_loop_over_data(data.sources, location.file, location.line)


def _listed_sites(sites: Sites, location: Location) -> list[ReadSite]:
    """The read sites under ``location``, most reads first. A CPU fallback's input copies are
    listed only beside reads of another kind at the line: alone, the fallback is the finding
    (aten_fallback) and its copies no separate host sync."""
    found = list(sites.read_sites.get(location, {}).values())
    if not any(site.fallback_op is None for site in found):
        return []
    return sorted(found, key=lambda site: -site.reads)


def _label(site: ReadSite) -> str:
    if site.frame is None:
        return "your line"
    return f"`{site.frame.function}` ({_short(site.frame)})"


def _site_evidence(site: ReadSite, location: Location, cost: float | None) -> dict[str, object]:
    """One read site as an evidence line: the user's line and library frame, its reads and the
    wait they cost (executions they forced x the median execution time)."""
    frame = site.frame
    return {
        "user_line": str(location),
        "library_frame": None if frame is None else f"{frame.function} ({_short(frame)})",
        "reads": site.reads,
        "forced_executions": len(site.forced),
        "cpu_fallback_op": site.fallback_op,
        "steps_with_reads": len(site.steps) or None,
        "wait_seconds": None if cost is None else round(len(site.forced) * cost, 6),
    }


def _per_site_suggestion(listed: list[ReadSite], closures: bool) -> str:
    """Advice per read site: each place reads on its own, so each needs its own change."""
    lines = ["Each place reads on its own; removing one leaves the others:"]
    for site in listed:
        frame = site.frame
        if frame is None:
            advice = SUGGESTION.format(closures="" if closures else _CLOSURE_ADVICE)
        else:
            known = _known(frame)
            if known is not None:
                advice = f"{known.what}. {known.fix}"
            elif site.fallback_op is not None:
                advice = (
                    f"{site.fallback_op} has no XLA lowering: it runs on the CPU, copying its "
                    "input to the host (the aten_fallback finding)."
                )
            else:
                package = _package(frame)
                advice = (
                    f"reads a device value on the host below your line; look for a {package} "
                    "option that avoids the read."
                )
        lines.append(f"- {_label(site)} ({site.reads} reads): {advice}")
    return "\n".join(lines)


def _split_evidence(data: AnalysisInput, forced: int, evidence: dict[str, object]) -> str:
    """Add what the split costs to ``evidence``; return the title's words for it."""
    executions = data.executions()
    steps = data.step_count()
    evidence["executions_forced_by_reads"] = forced
    evidence["executions"] = executions
    cost = _seconds_per_execution(data)
    evidence["seconds_per_execution"] = None if cost is None else round(cost, 6)
    evidence["extra_execute_seconds"] = None if cost is None else round(forced * cost, 6)
    if executions is not None and steps:
        return (
            f"; each read runs the graph traced so far on its own, splitting the step's "
            f"graph in two ({executions} executions for {steps} steps)"
        )
    return "; each read splits the step's graph in two"


def _unplaced(
    data: AnalysisInput, metrics_evidence: dict[str, object], closures: bool
) -> list[Finding]:
    """Reads no line holds: profiler notes, else the counters' reads not explained by CPU
    fallbacks."""
    transfers = data.device_to_host_transfers()
    scalar_reads = data.aten_counters().get(HOST_SYNC_OP)
    steps = data.step_count()
    findings = []
    generic = _suggestion(None, None, closures)
    for note in data.debug.too_frequent:
        if note.metric in FROM_DEVICE_METRICS:
            findings.append(
                Finding(
                    kind=Kind.HOST_SYNC,
                    severity=Severity.WARNING,
                    title=f"{note.metric} too frequent: {note.count} reads during "
                    f"{note.steps} steps",
                    evidence={"reads": note.count, "steps": note.steps, "log_line": note.line},
                    suggestion=generic,
                )
            )
    if findings:
        return findings
    # Each CPU-fallback call also transfers its inputs to the host; those are reported as
    # fallbacks, so only the transfers they do not explain count here.
    fallback_calls = sum(v or 0 for v in data.aten_fallbacks().values())
    count = max((transfers or 0) - fallback_calls, scalar_reads or 0)
    metrics_evidence["cpu_fallback_calls"] = fallback_calls
    if count < HOST_SYNC_MIN_COUNT:
        return []
    return [
        Finding(
            kind=Kind.HOST_SYNC,
            severity=_severity(count, steps),
            title=f"{count} device-to-host reads"
            + (f" in {steps} steps" if steps else "")
            + ": the host waits on the device",
            evidence=metrics_evidence,
            suggestion=generic
            + " Run under `xlaprof run` (or with XLA_FNTRACKER_FILE set) to see the source line.",
        )
    ]


def _splits_step(data: AnalysisInput, forced: list[DebugEvent], stack: list[Frame]) -> bool:
    """Whether the reads that forced ``forced`` cut their step's own graph in two.

    A step's own graph is its last execution that no read forced (the sync's). A read splits it
    when that graph ran after the read, the read's line comes before the sync's in the function
    that holds both (an evaluation read after ``torch_xla.sync()`` comes after it), and steps
    without a read at this line never ran the same graph last (had the read cut nothing, the
    graph would be theirs). ``stack`` is the read's longest stack, innermost frame first.
    Without step numbers (a pasted log), every forced execution is taken as a split, as
    torch_xla's cause says. Reads after the last recorded step (Trainer's last log point, then
    its closing ``mark_step``) split no step.
    """
    if not forced:
        return False
    if any(event.step is None for event in forced):
        return True
    by_step: dict[int, list[DebugEvent]] = defaultdict(list)
    for event in data.debug.executions():
        if event.step is not None:
            by_step[event.step].append(event)
    read_steps = {event.step for event in forced}
    if data.steps:  # work after the last boundary (the script's tail) is in no step
        read_steps &= {row.step for row in data.steps}
    baseline = {
        end.graph_hash
        for step, events in by_step.items()
        if step not in read_steps and (end := _step_graph(events)) is not None
    }
    forced_ids = {id(event) for event in forced}
    for step in read_steps:
        events = by_step[step]  # type: ignore[index]
        end = _step_graph(events)
        if end is None or end.graph_hash in baseline:
            continue
        first_read = next(i for i, event in enumerate(events) if id(event) in forced_ids)
        if events.index(end) > first_read and not _after_sync(stack or forced[0].frames, end):
            return True
    return False


def _after_sync(stack: list[Frame], sync: DebugEvent) -> bool:
    """Whether the read at ``stack`` comes after the sync that ran ``sync`` in the user function
    holding both (its line is further down). A loader's sync sits at the loop's header, before
    the whole body, so it says nothing about the order and gives False."""
    if any(frame.file and frame.file.endswith(LOADER_FILE) for frame in sync.frames):
        return False
    sync_lines = {
        (frame.file, frame.function): frame.line
        for frame in sync.frames
        if frame.file is not None and frame.line is not None and not is_library_file(frame.file)
    }
    for frame in stack:
        line = sync_lines.get((frame.file or "", frame.function))
        if line is not None and frame.line is not None:
            return frame.line > line
    return False


def _step_graph(events: list[DebugEvent]) -> DebugEvent | None:
    """The last execution of a step that no read forced: the step's own graph."""
    for event in reversed(events):
        if not (event.cause and TENSOR_ACCESS_CAUSE in event.cause):
            return event
    return None


def _package(frame: Frame) -> str:
    return below_packages(frame.file or "").strip("/").split("/")[0]


def _short(frame: Frame) -> str:
    return f"{below_packages(frame.file or '').strip('/')}:{frame.line}"


def _known(frame: Frame | None) -> LibraryRead | None:
    if frame is None:
        return None
    below = below_packages(frame.file or "")
    for known in KNOWN_READS:
        if below.endswith("/" + known.path) and frame.function == known.function:
            return known
    return None


def _suggestion(library: Frame | None, known: LibraryRead | None, closures: bool) -> str:
    generic = SUGGESTION.format(closures="" if closures else _CLOSURE_ADVICE)
    if library is None:
        return generic
    package = _package(library)
    where = f"`{library.function}` in {package} ({_short(library)})"
    if known is not None:
        return f"The read is not in your code: {where} {known.what}. {known.fix}"
    return (
        f"The read is not in your code: {where} reads a device value on the host, below your "
        f"line, so no change at your line removes it. Look for a {package} option that avoids "
        f"the read (an implementation that keeps shapes fixed), or ask {package} for one."
    )


def _uses_step_closures(data: AnalysisInput, lines: list[Location]) -> bool:
    """Whether the script already logs through ``xm.add_step_closure``: a read or execution
    made inside a step closure, or the call in the source of a file that reads."""
    for record in data.debug.fallbacks:
        if any(frame.function in _CLOSURE_FUNCTIONS for frame in record.frames):
            return True
    for event in data.debug.events:
        if any(frame.function in _CLOSURE_FUNCTIONS for frame in event.frames):
            return True
    for file in {location.file for location in lines}:
        text = data.sources.text(file)
        if text is not None and "add_step_closure" in text:
            return True
    return False


def _seconds_per_execution(data: AnalysisInput) -> float | None:
    """Median device seconds per graph execution, None when not measured: the device's own
    busy time per execution where the run recorded its executions (``AnalysisInput.device``),
    else ExecuteTime's median (launch to completion: a run whose reads drain the queue every
    step has little queue in it)."""
    device = data.device
    if device is not None and device.execution_busy:
        import statistics

        return statistics.median(device.execution_busy)
    for report in reversed(data.reports):
        metric = report.metrics.get("ExecuteTime")
        if metric is not None and metric.total_samples:
            median = metric.percentiles.get(50.0)
            if median is not None:
                return median
            if metric.accumulator is not None:
                return metric.accumulator / metric.total_samples
    executed = [s for s in data.steps if s.executions]
    if executed and device is None:
        return sum(s.execute_s for s in executed) / sum(s.executions for s in executed)
    return None


def _severity(count: int, steps: int | None) -> Severity:
    if count >= HOST_SYNC_WARN_COUNT or (steps and count >= steps):
        return Severity.WARNING
    return Severity.INFO
