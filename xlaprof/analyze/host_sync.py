"""Host syncs: the host reads a device tensor (``.item()``, ``.cpu()``, ``print``) mid-step.

A read blocks the Python thread until the device has run everything the value depends on, so
tracing of the next step cannot overlap device work. Evidence comes from execution causes
("most likely user code trying to access tensor value"), from the fallback tracker's
``_local_scalar_dense`` records (each ``.item()`` with its line), and from metrics
(``TransferFromDeviceTime`` samples, the ``aten::_local_scalar_dense`` counter).
"""

from __future__ import annotations

from collections import Counter

from xlaprof.analyze.data import HOST_SYNC_OP, AnalysisInput
from xlaprof.analyze.frames import user_location
from xlaprof.findings import Finding, Kind, Location, Severity

# Reading a value once or twice (a final loss print) is normal; from this many on, report it.
HOST_SYNC_MIN_COUNT = 3
# From this many reads (or one per step) it is a warning rather than a note.
HOST_SYNC_WARN_COUNT = 10
_TENSOR_ACCESS_CAUSE = "access tensor value"

SUGGESTION = (
    "Keep values on the device between steps: accumulate metrics in tensors and read them every "
    "N steps, or log through xm.add_step_closure(...) so the read happens after "
    "torch_xla.sync() without stalling tracing. Avoid .item(), .cpu(), .tolist() and print() of "
    "device tensors inside the step, and Python `if` on tensor values."
)


def analyze(data: AnalysisInput) -> list[Finding]:
    sites: Counter[Location] = Counter()
    for event in data.debug.executions():
        if event.cause and _TENSOR_ACCESS_CAUSE in event.cause:
            location = user_location(event.frames)
            if location is not None:
                sites[location] += 1
    tracker: Counter[Location] = Counter()
    for record in data.debug.fallbacks:
        if record.op == HOST_SYNC_OP:
            location = user_location(record.frames)
            if location is not None:
                tracker[location] += record.count
    for location, count in tracker.items():
        # An .item() on a pending tensor shows in both sources: count it once.
        sites[location] = max(sites[location], count)

    transfers = data.device_to_host_transfers()
    scalar_reads = data.aten_counters().get(HOST_SYNC_OP)
    steps = data.step_count()
    metrics_evidence = {
        "device_to_host_transfers": transfers,
        "local_scalar_dense": scalar_reads,
        "steps": steps,
    }
    findings = []
    for location, count in sites.most_common():
        if count < HOST_SYNC_MIN_COUNT:
            continue
        findings.append(
            Finding(
                kind=Kind.HOST_SYNC,
                severity=_severity(count, steps),
                title=f"Host sync at {location}: device tensor read {count} times",
                evidence={"reads_at_site": count, **metrics_evidence},
                location=location,
                suggestion=SUGGESTION,
            )
        )
    if findings:
        return findings
    count = max(transfers or 0, scalar_reads or 0)
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


def _severity(count: int, steps: int | None) -> Severity:
    if count >= HOST_SYNC_WARN_COUNT or (steps and count >= steps):
        return Severity.WARNING
    return Severity.INFO



