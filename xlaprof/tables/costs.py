"""What each finding costs the run, shared so that the findings' costs add up.

Two findings can point at the same seconds: two recompilation findings that compiled in the
same step (one cause split in parts, or two causes in one step), or several host-sync read
sites that read in the same steps. Each second the run measured is given to at most one
finding, so the findings' costs add up to no more than what the run spent:

- ``recompilation``: a step's compile time (the step model's compile part) goes to the
  findings that compiled in it after warm-up, in equal parts; a step named twice by one
  finding (its two graphs) is paid once.
- ``host_sync``: the run's time in device-to-host reads (``TransferFromDeviceTime``: a read
  waits for the device to finish the graph, then copies), per step (the median steady step
  with reads) and over the run. One read site takes it all; several take each its reads' share
  of all the run's reads (reads at the site / transfers), so reads no finding holds (an
  occasional log line) stay with no one.

Other kinds keep what their analyzer set (``tracing_bound`` sets its own), else none.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from xlaprof.findings import Cost, Finding, Kind

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.rundir.schema import StepRow

COMPILE_BASIS = (
    "compile time (CompileTime; in a traced step its compile spans) of the steps after "
    "warm-up it compiled in"
)
READ_BASIS = (
    "time in device-to-host reads (TransferFromDeviceTime: a read waits for the device to "
    "finish the graph, then copies)"
)


def finding_costs(
    findings: Sequence[Finding],
    rows: Sequence[StepRow],
    timeline: pd.DataFrame | None,
    warmup_steps: int,
) -> None:
    """Give each recompilation and host-sync finding that has no cost the run's measured
    seconds for it, shared as the module says."""
    pending = [f for f in findings if f.cost is None]
    _compile_costs(
        [f for f in pending if f.kind is Kind.RECOMPILATION], rows, timeline, warmup_steps
    )
    _read_costs([f for f in pending if f.kind is Kind.HOST_SYNC], rows, warmup_steps)


def _compile_costs(
    findings: list[Finding],
    rows: Sequence[StepRow],
    timeline: pd.DataFrame | None,
    warmup_steps: int,
) -> None:
    # the step model's compile part, as the story's "compiled again" line says it
    compile_s: dict[int, float] = {}
    if timeline is not None and not timeline.empty:
        compile_s = {
            int(s): float(c)
            for s, c in zip(timeline["step"], timeline["compile_s"], strict=True)
            if c == c
        }
    after = [row.step for row in rows if row.step >= warmup_steps]
    steps_of = [
        sorted({int(s) for s in f.evidence.get("compile_steps") or [] if int(s) >= warmup_steps})
        for f in findings
    ]
    holders = Counter(step for steps in steps_of for step in steps)
    for finding, steps in zip(findings, steps_of, strict=True):
        paid = [compile_s[s] / holders[s] for s in steps if s in compile_s]
        if not paid:
            continue
        total = sum(paid)
        recurs = len(after) > 0 and len(steps) > len(after) / 2
        shared = sorted({holders[s] for s in steps if s in compile_s and holders[s] > 1})
        basis = COMPILE_BASIS
        if shared:
            basis += ", shared equally with the other findings that compiled in the same steps"
        finding.cost = Cost(
            per_step_s=total / len(after) if recurs else None,
            one_time_s=None if recurs else total,
            run_s=total,
            steps=len(paid),
            basis=basis,
        )


def _read_costs(findings: list[Finding], rows: Sequence[StepRow], warmup_steps: int) -> None:
    reading = [r for r in rows if r.transfers_from_device > 0]
    if not findings or not reading:
        return
    run_s = sum(r.from_device_s for r in reading)
    steady = [r.from_device_s for r in reading if r.step >= warmup_steps and r.compiles == 0]
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
        return  # a site whose reads are not counted cannot be given its share
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
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
