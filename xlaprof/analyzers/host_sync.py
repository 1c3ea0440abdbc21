"""Host syncs: the host reads a device tensor (``.item()``, ``.cpu()``, ``print``) mid-step.

A read blocks the Python thread until the device has run everything the value depends on, so
tracing of the next step cannot overlap device work. Evidence comes from execution causes
("most likely user code trying to access tensor value"), from the fallback tracker's
``_local_scalar_dense`` records (each ``.item()`` with its line), and from metrics
(``TransferFromDeviceTime`` samples, the ``aten::_local_scalar_dense`` counter).
"""

from __future__ import annotations

from collections import Counter

from xlaprof.analyzers.shared.sites import attribute
from xlaprof.findings import Finding, Kind, Location, Severity
from xlaprof.model.input import FROM_DEVICE_METRICS, HOST_SYNC_OP, AnalysisInput
from xlaprof.parse.frames import user_location

_TENSOR_ACCESS_CAUSE = "access tensor value"

# Reading a value once or twice (a final loss print) is normal; from this many on, report it.
HOST_SYNC_MIN_COUNT = 3
# A read that splits no graph (the step already ran: it copies and waits) counts when it happens
# in at least this share of the steps; a read that splits the step's graph always counts.
HOST_SYNC_MIN_STEP_SHARE = 0.5
# From this many reads (or one per step) it is a warning rather than a note.
HOST_SYNC_WARN_COUNT = 10

SUGGESTION = (
    "Keep values on the device between steps: accumulate metrics in tensors and read them every "
    "N steps, or log through xm.add_step_closure(...) so the read happens after "
    "torch_xla.sync() without stalling tracing. Avoid .item(), .cpu(), .tolist() and print() of "
    "device tensors inside the step, and Python `if` on tensor values."
)


def unmeasured(data: AnalysisInput) -> str | None:
    """Why this analyzer could not have looked at ``data`` (no counts of reads), or None."""
    if data.reports or data.steps or data.debug.events or data.debug.fallbacks:
        return None
    return "no metrics, per-step rows or debug events in the input"


def analyze(data: AnalysisInput) -> list[Finding]:
    sites = attribute(data).reads
    transfers = data.device_to_host_transfers()
    scalar_reads = data.aten_counters().get(HOST_SYNC_OP)
    steps = data.step_count()
    metrics_evidence = {
        "device_to_host_transfers": transfers,
        "local_scalar_dense": scalar_reads,
        "steps": steps,
    }
    forced = _forced_executions(data)
    executions = data.executions()
    findings = []
    for location, count in sites.most_common():
        split = forced.get(location, 0)
        if count < HOST_SYNC_MIN_COUNT:
            continue
        if not split and steps and count < HOST_SYNC_MIN_STEP_SHARE * steps:
            continue  # an occasional read of a finished step's value (a per-epoch log line)
        evidence: dict[str, object] = {"reads_at_site": count, **metrics_evidence}
        title = f"Host sync: a device tensor is read on the host {count} times"
        evidence["splits_step_graph"] = split > 0
        if split:
            evidence["executions_forced_by_reads"] = split
            evidence["executions"] = executions
            cost = _seconds_per_execution(data)
            evidence["seconds_per_execution"] = None if cost is None else round(cost, 6)
            evidence["extra_execute_seconds"] = None if cost is None else round(split * cost, 6)
            title += (
                f"; each read runs the graph traced so far on its own, splitting the step's "
                f"graph in two ({executions} executions for {steps} steps)"
                if executions is not None and steps
                else "; each read splits the step's graph in two"
            )
        findings.append(
            Finding(
                kind=Kind.HOST_SYNC,
                severity=_severity(count, steps),
                title=title,
                evidence=evidence,
                location=location,
                suggestion=SUGGESTION,
            )
        )
    if findings or sites:
        # Reads placed at lines are the best evidence: the counters must not report the reads
        # those lines were judged by (an occasional log line) once more without a line.
        return findings
    for note in data.debug.too_frequent:
        if note.metric in FROM_DEVICE_METRICS:
            findings.append(
                Finding(
                    kind=Kind.HOST_SYNC,
                    severity=Severity.WARNING,
                    title=f"{note.metric} too frequent: {note.count} reads during "
                    f"{note.steps} steps",
                    evidence={"reads": note.count, "steps": note.steps, "log_line": note.line},
                    suggestion=SUGGESTION,
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
            suggestion=SUGGESTION
            + " Run under `xlaprof run` (or with XLA_FNTRACKER_FILE set) to see the source line.",
        )
    ]


def _forced_executions(data: AnalysisInput) -> Counter[Location]:
    """Executions a read forced mid-step (torch_xla's "access tensor value" cause), by line."""
    forced: Counter[Location] = Counter()
    for event in data.debug.executions():
        if event.cause and _TENSOR_ACCESS_CAUSE in event.cause:
            location = user_location(event.frames)
            if location is not None:
                forced[location] += 1
    return forced


def _seconds_per_execution(data: AnalysisInput) -> float | None:
    """Median device seconds per graph execution (ExecuteTime), None when not measured."""
    for report in reversed(data.reports):
        metric = report.metrics.get("ExecuteTime")
        if metric is not None and metric.total_samples:
            median = metric.percentiles.get(50.0)
            if median is not None:
                return median
            if metric.accumulator is not None:
                return metric.accumulator / metric.total_samples
    executed = [s for s in data.steps if s.executions]
    if executed:
        return sum(s.execute_s for s in executed) / sum(s.executions for s in executed)
    return None


def _severity(count: int, steps: int | None) -> Severity:
    if count >= HOST_SYNC_WARN_COUNT or (steps and count >= steps):
        return Severity.WARNING
    return Severity.INFO
