"""What the reports say of every step at once, from the rows or from a pod's aggregates.

The console and HTML device sections show, per device, the median wall, busy and idle time of
its steps and its slowest step, which steps ran autotuning, and over the host vs device table,
how many steps each verdict has and the median figures behind it (``StepOverview``). For a
trace in memory these come from its tables (``overview_of``); for a pod, each worker reduces
its host's tables to ``StepAggregates`` (``host_aggregates``) and the parent merges them, with
exact medians read back from the hosts' on-disk tables one histogram bin at a time
(``xlaprof.inputs.pod``): the same numbers, in memory that does not grow with the steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from xlaprof.model.stats import (
    AUTOTUNE_STEPS,
    TOP_STEPS,
    DeviceStepStats,
    Digest,
    HostWalls,
    StepAggregates,
    StepOverview,
    StepWalls,
    TracingStats,
)
from xlaprof.tables.step_times import step_edges, whole_steps

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.model.device import DeviceSummary

# Per device (by name, over hosts): its numbered steps and where they came from, the median
# wall, busy and idle time (s), and the slowest step.
STEP_STATS_COLUMNS = [
    "device",
    "steps",
    "step_source",
    "median_wall_s",
    "median_busy_s",
    "median_idle_s",
    "slowest_s",
    "slowest_step",
]


def numbered(steps: pd.DataFrame) -> pd.DataFrame:
    """The device steps with a step number (a whole-capture window has none)."""
    return steps[steps["step"].notna()]


def overview_of(summary: DeviceSummary) -> StepOverview:
    """The overview a pod's loader computed, else computed here from the summary's tables."""
    if summary.overview is not None:
        return summary.overview
    import pandas as pd

    steps = numbered(summary.steps)
    rows = []
    for device, group in steps.groupby("device", sort=True):
        median = group[["wall_s", "busy_s", "idle_s"]].median()
        at = _slowest(group["wall_s"].to_numpy(dtype="float64", na_value=float("nan")))
        slowest = None if at is None else group.iloc[at]
        rows.append(
            {
                "device": str(device),
                "steps": len(group),
                "step_source": str(group["step_source"].iloc[0]),
                "median_wall_s": _number(median["wall_s"]),
                "median_busy_s": _number(median["busy_s"]),
                "median_idle_s": _number(median["idle_s"]),
                "slowest_s": None if slowest is None else _number(slowest["wall_s"]),
                "slowest_step": None if slowest is None else int(slowest["step"]),
            }
        )
    tracing = summary.tracing
    known = tracing[tracing["bound"].notna()]
    return StepOverview(
        devices=pd.DataFrame(rows, columns=STEP_STATS_COLUMNS),
        autotune_steps=_autotune_steps(steps)[:AUTOTUNE_STEPS],
        tracing=_tracing_stats(tracing),
        median_busy_s=_number(known["device_busy_s"].median()) if len(known) else None,
        # the host's measured work (``host_busy_s``), not the step's unmeasured rest
        median_tracing_s=_number(known["host_busy_s"].median()) if len(known) else None,
        median_idle_s=_number(known["device_idle_s"].median()) if len(known) else None,
    )


def host_aggregates(
    host_steps: pd.DataFrame,
    device_steps: pd.DataFrame,
    tracing: pd.DataFrame,
    rows: dict[str, int],
) -> StepAggregates:
    """One host's per-step tables reduced to what a pod's parent merges (``StepAggregates``)."""
    steps = numbered(device_steps)
    devices = []
    for device, group in steps.groupby("device", sort=True):
        walls = group["wall_s"].to_numpy(dtype="float64", na_value=float("nan"))
        at = _slowest(walls)
        devices.append(
            DeviceStepStats(
                device=str(device),
                steps=len(group),
                source=str(group["step_source"].iloc[0]),
                wall=Digest.of(walls),
                busy=Digest.of(group["busy_s"].to_numpy(dtype="float64", na_value=float("nan"))),
                idle=Digest.of(group["idle_s"].to_numpy(dtype="float64", na_value=float("nan"))),
                slowest_s=None if at is None else float(walls[at]),
                slowest_step=None if at is None else int(group["step"].iloc[at]),
                autotune_steps=_autotune_steps(group)[:AUTOTUNE_STEPS],
            )
        )
    marked = host_steps[(host_steps["device"] == "host").to_numpy(dtype=bool, na_value=False)]
    host = _host_walls(marked) if len(marked) else None
    step_numbers = host_steps["step"]
    return StepAggregates(
        rows=dict(rows),
        first_step=int(step_numbers.min()) if len(step_numbers) else None,
        last_step=int(step_numbers.max()) if len(step_numbers) else None,
        devices=devices,
        tracing=_tracing_stats(tracing),
        host=host,
    )


def _host_walls(marked: pd.DataFrame) -> HostWalls:
    """One host's host-step rows (``marked``, one or more) as ``HostWalls``: the figures of
    every step, and of its whole steps (``whole_steps``: all but its first and last, the rule
    ``Trace.step_times`` applies where a capture was cut mid-step)."""
    from xlaprof.tables.grouped import text_codes

    edges = step_edges(marked)
    ((first, last),) = edges.values()  # one host's rows
    numbers = marked["step"].to_numpy(dtype="int64")
    walls = marked["wall_ms"].to_numpy(dtype="float64")
    host, hosts = text_codes(marked["host"])
    whole = whole_steps(host, hosts, numbers, edges)
    return HostWalls(
        every=_step_walls(numbers, walls),
        whole=_step_walls(numbers[whole], walls[whole]),
        first_step=first,
        last_step=last,
    )


def _step_walls(numbers: Any, walls: Any) -> StepWalls:
    """Host steps (their numbers and wall times, ms) as ``StepWalls``: no figures (None, an
    empty digest) where there are none, or none measured."""
    import numpy as np

    # slowest first, the smaller step first among equal walls (NaN last)
    top = np.lexsort((numbers, -walls))[:TOP_STEPS]
    slowest = list(zip(numbers[top].tolist(), walls[top].tolist(), strict=True))
    wall, fastest = Digest.of(walls), _fastest(walls)
    return StepWalls(
        wall=wall,
        fastest_step=None if fastest is None else int(numbers[fastest]),
        slowest_step=slowest[0][0] if wall.count else None,
        slowest=slowest,
    )


def merge_device_stats(stats: Iterable[DeviceStepStats]) -> dict[str, DeviceStepStats]:
    """Per device name, its steps over hosts (taken in host order): digests merged, the
    first host's step source, the slowest step (the first host's on a tie), and the smallest
    step numbers with autotuning."""
    merged: dict[str, list[DeviceStepStats]] = {}
    for item in stats:
        merged.setdefault(item.device, []).append(item)
    out = {}
    for device, items in sorted(merged.items()):
        slowest = None
        for item in items:
            if item.slowest_s is not None and (slowest is None or item.slowest_s > slowest[0]):
                slowest = (item.slowest_s, item.slowest_step)
        out[device] = DeviceStepStats(
            device=device,
            steps=sum(i.steps for i in items),
            source=items[0].source,
            wall=Digest.merged(i.wall for i in items),
            busy=Digest.merged(i.busy for i in items),
            idle=Digest.merged(i.idle for i in items),
            slowest_s=None if slowest is None else slowest[0],
            slowest_step=None if slowest is None else slowest[1],
            autotune_steps=sorted({s for i in items for s in i.autotune_steps})[:AUTOTUNE_STEPS],
        )
    return out


def merge_tracing_stats(stats: Iterable[TracingStats]) -> TracingStats:
    items = list(stats)
    verdicts: dict[str, int] = {}
    for item in items:
        for verdict, count in item.bounds.items():
            verdicts[verdict] = verdicts.get(verdict, 0) + count
    return TracingStats(
        rows=sum(i.rows for i in items),
        known=sum(i.known for i in items),
        bounds=verdicts,
        lazy=any(i.lazy for i in items),
        lazy_known=any(i.lazy_known for i in items),
        busy=Digest.merged(i.busy for i in items),
        tracing=Digest.merged(i.tracing for i in items),
        idle=Digest.merged(i.idle for i in items),
    )


def _tracing_stats(tracing: pd.DataFrame) -> TracingStats:
    if tracing.empty:
        return TracingStats()
    known = tracing[tracing["bound"].notna()]

    def floats(frame: pd.DataFrame, column: str) -> Any:
        return frame[column].to_numpy(dtype="float64", na_value=float("nan"))

    return TracingStats(
        rows=len(tracing),
        known=len(known),
        bounds={str(k): int(v) for k, v in known["bound"].value_counts(sort=False).items()},
        lazy=_any(tracing["lazy_tensor"]),
        lazy_known=_any(known["lazy_tensor"]),
        busy=Digest.of(floats(known, "device_busy_s")),
        tracing=Digest.of(floats(known, "host_busy_s")),
        idle=Digest.of(floats(known, "device_idle_s")),
    )


def _autotune_steps(steps: pd.DataFrame) -> list[int]:
    """The step numbers (sorted, distinct) with autotuning time."""
    if steps.empty or "autotune_s" not in steps:
        return []
    chosen = steps[(steps["autotune_s"] > 0).fillna(False).to_numpy(dtype=bool)]["step"]
    return sorted({int(step) for step in chosen})


def _any(column: pd.Series) -> bool:
    return bool(column.fillna(False).astype(bool).any())


def _slowest(walls: Any) -> int | None:
    """Where the largest wall time is (the first of equals; NaN skipped), None if none is."""
    import numpy as np

    if not len(walls) or np.isnan(walls).all():
        return None
    return int(np.nanargmax(walls))


def _fastest(walls: Any) -> int | None:
    """Where the smallest wall time is (the first of equals; NaN skipped), None if none is."""
    import numpy as np

    if not len(walls) or np.isnan(walls).all():
        return None
    return int(np.nanargmin(walls))


def _number(value: Any) -> float | None:
    """A float, or None where the value was not measured (NaN, NA)."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else number


# Per device over its captured steps (``bottleneck.steady_steps``: XProf's rule, the first and
# last of more than five left out; steps that compiled stay, compile_in_step reads them): how
# many numbered steps, their
# summed wall time and seconds per cause, the smallest step numbers each cause bounds, and
# whether any step of the device (edges too) has wall time. Sums, so a pod's workers make it
# per host and the parent only puts hosts side by side.
BOUND_STEPS = 9  # step numbers kept per cause: 8 are named, and whether there are more


def by_device_columns() -> list[str]:
    from xlaprof.tables.device.bottleneck import CLASSES

    return [
        "session",
        "host",
        "device",
        "steps",
        "wall_s",
        *[f"{name}_s" for name in CLASSES],
        *[f"bound_{name}" for name in CLASSES],
        "any_wall",
    ]


def by_device(summary: DeviceSummary) -> pd.DataFrame:
    """The per-device steady-step sums of ``summary`` (see above): a pod's from its workers,
    else made from its bottleneck rows."""
    import pandas as pd

    if summary.bottleneck_by_device is not None:
        return summary.bottleneck_by_device
    from xlaprof.tables.device.bottleneck import CLASSES, steady_steps

    table = summary.bottleneck
    rows = []
    if table is not None and not table.empty:
        for (session, host, device), group in table.groupby(
            ["session", "host", "device"], observed=True, sort=True
        ):
            steps = steady_steps(group)
            numbered = steps[steps["step"].notna()]
            bound = _bound_steps(numbered)
            rows.append(
                {
                    "session": session,
                    "host": host,
                    "device": device,
                    "steps": len(numbered),
                    "wall_s": float(steps["wall_s"].sum()),
                    **{f"{name}_s": float(steps[f"{name}_s"].sum()) for name in CLASSES},
                    **{f"bound_{name}": bound[name] for name in CLASSES},
                    "any_wall": bool((group["wall_s"] > 0).any()),
                }
            )
    return pd.DataFrame(rows, columns=by_device_columns())


def _bound_steps(numbered: pd.DataFrame) -> dict[str, list[int]]:
    """Per cause, the smallest step numbers (``BOUND_STEPS`` of them, sorted) it bounds."""
    import numpy as np

    from xlaprof.tables.device.bottleneck import CLASSES

    causes = numbered["bottleneck"]
    numbers = numbered["step"].to_numpy(dtype="int64")
    return {
        name: np.sort(numbers[(causes == name).to_numpy(dtype=bool, na_value=False)])[
            :BOUND_STEPS
        ].tolist()
        for name in CLASSES
    }


def device_bottlenecks(table: pd.DataFrame) -> pd.DataFrame:
    """``bottleneck.bottleneck_summary`` of the rows ``table`` (``by_device``) sums: per device
    its steady steps' seconds per cause as shares of their wall time, and the bottleneck."""
    import pandas as pd

    from xlaprof.tables.device.bottleneck import CLASSES, SUMMARY_COLUMNS, summary_row

    rows = []
    for row in table.to_dict(orient="records"):
        sums = {name: float(row[f"{name}_s"]) for name in CLASSES}
        where = (row["session"], row["host"], row["device"])
        found = summary_row(where, int(row["steps"]), row["wall_s"], sums)
        if found is not None:
            rows.append(found)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
