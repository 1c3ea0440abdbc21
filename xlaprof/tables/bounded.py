"""Per-step tables cut to a bound for the finished result, whatever the step count.

A 45,000-step capture has 45,000 timeline rows, and a pod of four hosts of it 90,000 straggler
rows and 360,000 per-host rows (180,000 of the heat map's device): a report cannot show them,
a figure cannot draw them usefully, and writing them made ``--json`` 110 MB. The pipeline
keeps the exact aggregates over every step (the story's median step and counts, the
stragglers' and host skew's one-line summaries, the device medians from histograms) and
keeps, of each per-step table, the rows chosen for what they are shown for:

- the step timeline (a bar per step): the first ``TIMELINE_FIRST_STEPS`` steps (warm-up and the
  early steady state at full resolution), the warm-up steps, the median steady step, the first
  traced steps the console lists, and, in each of equal ranges of the other steps, the fastest
  and the slowest step (the min/max downsampling of a long series: a spike or a dip stays
  visible);
- stragglers and host skew: the first rows in step order (a contiguous range, as the first
  steps of the heat map), the stragglers of the steps the heat map draws, and the worst rows by
  how far the slowest host was behind the median host (host skew: by skew);
- the per-host heat map: the first ``HEATMAP_FIRST_STEPS`` steps and the steps where its
  device's slowest host was furthest behind.

Below each bound nothing is cut: a table of fewer rows is kept whole. What was cut is said in
``KeptRows`` (how many rows in all, how many kept, the step range, how they were chosen).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from xlaprof.model.result import KeptRows
from xlaprof.model.warmup import first_steady_of

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

# The step timeline: rows kept at most, and the first steps kept whole.
MAX_TIMELINE_ROWS = 2000
TIMELINE_FIRST_STEPS = 200
# Traced steady steps the console lists (``report.console``): kept wherever they fall.
TIMELINE_TRACED_SHOWN = 6
# Stragglers (per step and device) and host skew (per step): rows kept at most, and how many
# of them are the first rows in step order (the rest: the worst rows).
MAX_STRAGGLER_ROWS = 5000
STRAGGLER_FIRST_ROWS = 2000
MAX_SKEW_ROWS = 5000
SKEW_FIRST_ROWS = 2500
# The host x step heat map: steps drawn at most, and how many of them are the first steps.
MAX_HEATMAP_STEPS = 500
HEATMAP_FIRST_STEPS = 250


def bucket_extremes(values: np.ndarray, buckets: int) -> np.ndarray:
    """Positions of the smallest and the largest value in each of ``buckets`` equal ranges of
    positions (sorted, unique; a range whose values are all NaN keeps its first position)."""
    import numpy as np
    import pandas as pd

    count = len(values)
    if count == 0 or buckets <= 0:
        return np.zeros(0, dtype=np.int64)
    bucket = np.arange(count, dtype=np.int64) * min(buckets, count) // count
    series = pd.Series(np.asarray(values, dtype="float64"))
    groups = series.fillna(np.inf).groupby(bucket, sort=False)
    lowest = groups.idxmin().to_numpy()
    highest = series.fillna(-np.inf).groupby(bucket, sort=False).idxmax().to_numpy()
    return np.unique(np.concatenate([lowest, highest]).astype(np.int64))


def thin_timeline(
    timeline: pd.DataFrame, warmup_steps: int, median_step: int | None
) -> tuple[pd.DataFrame, KeptRows | None]:
    """``timeline`` (steps in order) cut to at most ``MAX_TIMELINE_ROWS`` rows (see the module
    docstring), and what was kept; the table itself and None at or below the bound."""
    import numpy as np

    total = len(timeline)
    if total <= MAX_TIMELINE_ROWS:
        return timeline, None
    steps = timeline["step"].to_numpy()
    keep = np.zeros(total, dtype=bool)
    keep[:TIMELINE_FIRST_STEPS] = True
    first = first_steady_of(timeline, warmup_steps, "compile_s")  # ``model.warmup``
    keep[np.flatnonzero(steps < first)[: MAX_TIMELINE_ROWS // 2]] = True  # the console's
    if median_step is not None:
        keep |= steps == median_step
    traced = np.flatnonzero((steps >= first) & (timeline["source"] == "trace").to_numpy())
    keep[traced[:TIMELINE_TRACED_SHOWN]] = True
    rest = np.flatnonzero(~keep)
    buckets = (MAX_TIMELINE_ROWS - int(keep.sum())) // 2
    walls = timeline["wall_s"].to_numpy(dtype="float64", na_value=np.nan)
    keep[rest[bucket_extremes(walls[rest], buckets)]] = True
    kept = timeline[keep]
    chosen = (
        f"the first {TIMELINE_FIRST_STEPS} steps, the warm-up steps, the median steady step, "
        f"the first {TIMELINE_TRACED_SHOWN} traced steps after warm-up, and in each of "
        f"{buckets} equal ranges of the other steps the fastest and the slowest step (wall time)"
    )
    return kept, _kept(total, kept, steps, chosen)


def first_and_worst(
    table: pd.DataFrame, by: str, limit: int, first: int, also: Iterable[int] = ()
) -> np.ndarray:
    """Positions of ``table``'s rows to keep, never more than ``limit`` (sorted): ``also``
    (positions, the first ``limit`` of them), the first ``first`` rows as room allows, then the
    largest ``by`` among the others (NaN last)."""
    import numpy as np

    keep = np.zeros(len(table), dtype=bool)
    keep[np.fromiter(also, dtype=np.int64)[:limit]] = True
    room = max(0, limit - int(keep.sum()))
    keep[np.flatnonzero(~keep[:first])[:room]] = True
    left = limit - int(keep.sum())
    if left > 0:
        values = table[by].to_numpy(dtype="float64", na_value=np.nan)
        others = np.flatnonzero(~keep)
        ranked = np.where(np.isnan(values[others]), -np.inf, values[others])
        worst = others[np.argsort(-ranked, kind="stable")[:left]]
        keep[worst] = True
    return np.flatnonzero(keep)


def heatmap_steps(stragglers: pd.DataFrame, device: str, steps: np.ndarray) -> np.ndarray | None:
    """The steps the host x step heat map of ``device`` draws, of its ``steps`` (sorted,
    unique): every step at or below ``MAX_HEATMAP_STEPS``, else the first
    ``HEATMAP_FIRST_STEPS`` and those where the slowest host was furthest behind the median
    (``stragglers``' ``behind_ms`` on ``device``). None: every step."""
    import numpy as np

    if len(steps) <= MAX_HEATMAP_STEPS:
        return None
    first = steps[:HEATMAP_FIRST_STEPS]
    mine = stragglers[(stragglers["device"] == device) & ~stragglers["step"].isin(first)]
    behind = mine["behind_ms"].to_numpy(dtype="float64", na_value=np.nan)
    order = np.argsort(-np.where(np.isnan(behind), -np.inf, behind), kind="stable")
    worst = mine["step"].to_numpy()[order[: MAX_HEATMAP_STEPS - len(first)]]
    return np.unique(np.concatenate([first, worst]).astype(np.int64))


def keep_rows(
    table: pd.DataFrame, positions: np.ndarray, chosen: str
) -> tuple[pd.DataFrame, KeptRows | None]:
    """``table``'s rows at ``positions`` and what was kept; the table itself and None where
    every row is kept."""
    if len(positions) >= len(table):
        return table, None
    kept = table.iloc[positions]
    return kept, _kept(len(table), kept, table["step"].to_numpy(), chosen)


def _kept(total: int, kept: pd.DataFrame, steps: np.ndarray, chosen: str) -> KeptRows:
    known = steps[steps == steps] if len(steps) else steps
    return KeptRows(
        total=total,
        kept=len(kept),
        first_step=int(known.min()) if len(known) else None,
        last_step=int(known.max()) if len(known) else None,
        chosen=chosen,
    )


def straggler_summary(table: pd.DataFrame | None) -> dict[str, Any] | None:
    """What the console's stragglers line says, over every row of ``table``: the host slowest
    most often, in how many rows, its median lead over the median host, its worst row and
    where its extra time went (None without rows; ``slowest_host`` None: no straggler)."""
    if table is None or table.empty:
        return None
    summary: dict[str, Any] = {"hosts": int(table["hosts"].max()), "rows": len(table)}
    rows: Any = table  # pandas' stubs take no label from idxmax
    found = rows[rows["slowest_host"].notna()]
    if found.empty:
        return {**summary, "slowest_host": None}
    counts = found["slowest_host"].value_counts()
    host = str(counts.index[0])
    mine = found[found["slowest_host"] == host]
    worst = mine.loc[mine["behind_ms"].idxmax()]
    return {
        **summary,
        "slowest_host": host,
        "slowest_rows": len(mine),
        "median_behind_ms": float(mine["behind_ms"].median()),
        "worst_step": int(worst["step"]),
        "worst_device": str(worst["device"]),
        "worst_slowest_ms": float(worst["slowest_ms"]),
        "worst_median_ms": float(worst["median_ms"]),
        "waiting_on": str(mine["waiting_on"].value_counts().index[0]),
    }


def skew_summary(skew: pd.DataFrame | None) -> dict[str, Any] | None:
    """What the console's host skew line says, over every step of ``skew``: the steps, the
    median skew and the worst step's hosts (None without rows)."""
    if skew is None or skew.empty:
        return None
    rows: Any = skew  # pandas' stubs take no label from idxmax
    worst = rows.loc[rows["skew"].idxmax()]
    return {
        "steps": len(skew),
        "hosts": int(worst["hosts"]),
        "median_skew": float(skew["skew"].median()),
        "worst_step": int(worst["step"]),
        "slowest_host": str(worst["slowest_host"]),
        "slowest_ms": float(worst["slowest_ms"]),
        "fastest_host": str(worst["fastest_host"]),
        "fastest_ms": float(worst["fastest_ms"]),
    }
