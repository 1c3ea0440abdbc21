"""The run's one step model: what bounds each step, and where a steady step's time goes.

Every per-step verdict xlaprof shows comes from here, so the step timeline, the host-vs-device
table, the bottleneck table, the story a report opens with and its charts cannot disagree:

- A step **traced** in a capture takes the bound of its busiest device in the bottleneck table
  (``tables/device/bottleneck.py``: the step's wall time split into causes that add up to it,
  host compile spans and data input included), its class mapped onto ``BOUNDS``
  (``bottleneck.busiest_bounds``; the host-vs-device table takes the same).
- A step known only from **per-step metrics** is split the same way from its timeline row:
  compiling (``compile_s``), host Python and lazy tracing (``python_tracing_s`` plus the graph
  build in the sync), transfers, and the rest of the step the host spent blocked (waiting on
  the device: ``device``). Parts that were not measured take no part.

A step's ``bound`` is its largest part and ``bound_share`` that part's share of the step's wall
time: a description of the step, not a finding. Whether it is worth a fix is the analyzers'
call, with their own thresholds; the story names the finding that matches, if there is one.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING

from xlaprof.findings import Finding, Kind
from xlaprof.model.result import StepStory
from xlaprof.parse.units import as_float
from xlaprof.tables.device.bottleneck import BOUNDS, busiest_bounds
from xlaprof.tables.timeline import steady_median

if TYPE_CHECKING:
    import pandas as pd

# Plain words for each bound (console, HTML).
BOUND_WORDS = {
    "compile": "compiling",
    "tracing": "host Python and lazy tracing",
    "input": "waiting for input data",
    "transfer": "host-device transfers",
    "device": "the device (busy, or the host waiting on it)",
    "host": "other host work (the device idle)",
}
# The parts of a step's wall time (``step_parts``), in words.
PART_WORDS = {
    "compile": "compiling",
    "tracing": "Python + tracing",
    "transfer": "transfers",
    "device": "waiting on the device",
}
STORY_COLUMNS = ("bound", "bound_share", "steady")


def with_bounds(
    timeline: pd.DataFrame,
    warmup_steps: int,
    bottleneck: pd.DataFrame | None = None,
    host: str | None = None,
) -> pd.DataFrame:
    """``timeline`` with ``bound``, ``bound_share`` and ``steady`` (after warm-up, compiling
    nothing): traced steps from ``bottleneck`` (``host``'s rows), the rest from their parts."""
    frame = timeline.copy()
    traced = busiest_bounds(bottleneck, host)
    from_trace = {
        int(step): (str(bound), float(share))
        for step, bound, share in zip(
            traced["step"], traced["bound"], traced["bound_share"], strict=True
        )
    }
    bounds: list[str | None] = []
    shares: list[float | None] = []
    for row in frame.to_dict(orient="records"):
        known = from_trace.get(int(row["step"]))
        bound, share = (None, None) if known is None else known
        if bound is None or row["source"] != "trace":
            bound, share = row_bound(row)
        bounds.append(bound)
        shares.append(share)
    frame["bound"] = bounds
    frame["bound_share"] = shares
    compiled = frame["compile_s"].fillna(0.0) > 0
    frame["steady"] = (frame["step"] >= warmup_steps) & ~compiled
    return frame


def row_bound(row: Mapping[Hashable, object]) -> tuple[str | None, float | None]:
    """The largest measured part of one timeline row and its share of the step's wall time."""
    parts = step_parts(row)
    wall = _number(row.get("wall_s"))
    measured = {name: seconds for name, seconds in parts.items() if seconds is not None}
    if not measured or not wall:
        return None, None
    bound = max(BOUNDS, key=lambda name: measured.get(name, -1.0))
    return bound, min(measured[bound] / wall, 1.0)


def step_parts(row: Mapping[Hashable, object]) -> dict[str, float | None]:
    """One timeline row's wall time by part (seconds; None where not measured): compiling,
    host Python and tracing, transfers, and the host blocked waiting (on the device) or, in a
    trace, ``WaitDeviceOps``."""
    wall = _number(row.get("wall_s"))
    compile_s = _number(row.get("compile_s"))
    python = _number(row.get("python_tracing_s"))
    build = _number(row.get("graph_build_s"))
    transfer = _number(row.get("transfer_s"))
    wait = _number(row.get("device_wait_s"))
    tracing = None if python is None and build is None else (python or 0.0) + (build or 0.0)
    if wait is None and wall is not None and tracing is not None:
        # metrics: CPU time is host work; the rest of the step the host was blocked
        used = tracing + (transfer or 0.0) + (compile_s or 0.0)
        wait = max(wall - used, 0.0)
    return {
        "compile": compile_s,
        "tracing": tracing,
        "transfer": transfer,
        "device": wait,
    }


def step_story(timeline: pd.DataFrame, warmup_steps: int) -> StepStory | None:
    """Where a steady step's time goes: the steady step of median wall time (its parts add up
    to it, where medians of each column would not), how the steady steps are bound, and what
    warm-up cost. ``timeline`` must carry ``with_bounds``' columns. None without steps."""
    if timeline is None or timeline.empty or "bound" not in timeline:
        return None
    steady = timeline[timeline["steady"] & timeline["wall_s"].notna()]
    warmup = timeline[timeline["step"] < warmup_steps]
    later = timeline[(timeline["step"] >= warmup_steps) & (timeline["compile_s"].fillna(0) > 0)]
    story = StepStory(
        steps=len(timeline),
        warmup_steps=len(warmup),
        steady_steps=len(steady),
        warmup_compile_s=_sum(warmup["compile_s"]),
        later_compile_steps=[int(s) for s in later["step"]],
        later_compile_s=_sum(later["compile_s"]) if len(later) else None,
    )
    if steady.empty:
        return story
    median, _ = steady_median(timeline, warmup_steps)
    row = median.to_dict()
    story.median_step = int(median["step"])
    story.median_wall_s = float(median["wall_s"])
    story.parts = step_parts(row)
    story.device_busy_s = _number(row.get("device_busy_s"))
    story.bound = None if median["bound"] is None else str(median["bound"])
    story.bound_share = _number(median["bound_share"])
    counts = steady["bound"].dropna().value_counts()
    story.bound_steps = {str(k): int(v) for k, v in counts.items()}
    return story


def worth_most(
    story: StepStory | None, findings: Sequence[Finding], answers: Mapping[str, Sequence[Kind]]
) -> Finding | None:
    """The one change worth most: the finding that answers what bounds the steady step (its
    bound's kinds in ``answers``, most specific first: ``xlaprof.analyzers.story_answers``, from
    each kind's registry entry), else the most severe finding. None without findings."""
    if not findings:
        return None
    bound = None if story is None else story.bound
    if bound is not None and bound in answers:
        for kind in answers[bound]:
            match = [f for f in findings if f.kind is kind]
            if match:
                return max(match, key=lambda f: f.severity.rank)
    return max(findings, key=lambda f: f.severity.rank)


def _number(value: object) -> float | None:
    if value is None:
        return None
    try:
        number = as_float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else number


def _sum(values: pd.Series) -> float | None:
    known = values.dropna()
    return float(known.sum()) if len(known) else None
