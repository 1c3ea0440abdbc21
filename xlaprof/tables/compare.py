"""Before/after comparison of two runs: the figures a fix is judged by, as ratios.

Every metric here is lower-is-better. A ratio above 1 is reported as worse in plain words: a
fix is never called an improvement without the numbers showing it.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from xlaprof.findings import Finding
from xlaprof.model.input import AnalysisInput

if TYPE_CHECKING:
    import pandas as pd

# (key, label, unit)
METRICS = (
    ("first_step_compile_s", "first-step compile time", "s"),
    ("compile_s", "total compile time", "s"),
    ("compiles", "compilations", ""),
    ("graph_ops", "largest graph (ops)", ""),
    ("step_median_s", "steady step time (median)", "s"),
    ("step_spread_s", "steady step time (spread, IQR)", "s"),
    ("host_cpu_median_s", "host CPU per step (median)", "s"),
    ("tracing_median_s", "lazy tracing per step (median)", "s"),
    ("peak_memory_bytes", "peak device memory", "B"),
)


def run_summary(data: AnalysisInput) -> dict[str, Any]:
    """The comparison figures of one run (None where the run lacks the data)."""
    steps = data.steps
    first = data.first_steady_step()
    steady_rows = [
        (s, time)
        for s, time in zip(steps, data.step_times(), strict=True)
        if s.step >= first and s.compiles == 0
    ]
    steady = [s for s, _ in steady_rows]
    # each step's time in the run (the step model's), not when its sync returned
    times = [time for _, time in steady_rows if time is not None]

    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    graph_ops = [g.hlo.op_count for g in data.graphs if g.hlo is not None]
    walls = sorted(times)
    spread = None
    if len(walls) >= 4:
        q1, _median, q3 = statistics.quantiles(walls, n=4)
        spread = q3 - q1
    memory = data.device_memory or {}
    return {
        "first_step_compile_s": steps[0].compile_s if steps else None,
        "compile_s": sum(s.compile_s for s in steps) if steps else None,
        "compiles": data.compiles(),
        "graph_ops": max(graph_ops) if graph_ops else None,
        "step_median_s": median(times),
        "host_cpu_median_s": median([s.host_cpu_s for s in steady if s.host_cpu_s is not None]),
        "tracing_median_s": median([s.tracing_s for s in steady]),
        "step_spread_s": spread,
        # where the backend reports it (TPU): the peak, else the use at the end of the run
        "peak_memory_bytes": memory.get("peak_bytes_used") or memory.get("bytes_used"),
        "steady_steps": len(steady),
    }


def describe_change(before: float | None, after: float | None) -> tuple[float | None, str]:
    """(after/before, words). Lower is better for every compared metric."""
    if before is None or after is None:
        return None, "not measured in both"
    if before == 0:
        return None, "unchanged" if after == 0 else "was zero"
    ratio = after / before
    if after == 0 or ratio == 0:  # no "Nx better": the ratio has no inverse (or underflowed)
        return 0.0, "down to zero" if after == 0 else "down to about zero"
    if not math.isfinite(ratio):  # before so small that the ratio overflows
        return None, "was about zero"
    if abs(ratio - 1) < 0.02:
        words = "about the same"
    elif ratio < 1:
        words = f"{1 / ratio:.2f}x better (lower)"
    else:
        words = f"{ratio:.2f}x worse (higher)"
    return ratio, words


def compare(before: dict[str, Any], after: dict[str, Any]) -> pd.DataFrame:
    """One row per metric: before, after, after/before, and the change in words."""
    import pandas as pd

    rows = []
    for key, label, unit in METRICS:
        ratio, words = describe_change(before.get(key), after.get(key))
        rows.append(
            {
                "metric": label,
                "unit": unit,
                "before": before.get(key),
                "after": after.get(key),
                "ratio": ratio,
                "change": words,
            }
        )
    return pd.DataFrame(rows, columns=["metric", "unit", "before", "after", "ratio", "change"])


def _shape(title: str) -> str:
    """A title with its numbers blanked: the same finding with other figures matches."""
    return re.sub(r"\d+(?:[.,]\d+)*", "#", title)


def match_findings(before: list[Finding], after: list[Finding]) -> tuple[list[str], list[str]]:
    """Titles of findings gone in ``after`` and new in it.

    Findings are matched as a multiset, first on (kind, location, title with numbers blanked),
    then on (kind, location) alone: a finding whose figures changed is neither gone nor new.
    Findings without a location are matched the same way, so two of one kind never collapse
    into one (as keying by (kind, location) in a dict did).
    """
    pending_before = list(before)
    pending_after = list(after)
    keys: tuple[Callable[[Finding], tuple[Any, ...]], ...] = (
        lambda f: (f.kind, str(f.location), _shape(f.title)),
        lambda f: (f.kind, str(f.location)),
    )
    for key in keys:
        unmatched = []
        available: dict[tuple[Any, ...], list[Finding]] = {}
        for finding in pending_after:
            available.setdefault(key(finding), []).append(finding)
        for finding in pending_before:
            candidates = available.get(key(finding))
            if candidates:
                candidates.pop(0)
            else:
                unmatched.append(finding)
        pending_before = unmatched
        pending_after = [f for group in available.values() for f in group]
        order = {id(f): i for i, f in enumerate(after)}
        pending_after.sort(key=lambda f: order[id(f)])
    return [f.title for f in pending_before], [f.title for f in pending_after]
