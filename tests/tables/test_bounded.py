"""Per-step tables cut to a bound (``xlaprof.tables.bounded``): what is kept of a long table,
and that a table at or below its bound is kept whole.

The tables here are small hand-written ones whose answer is seen by eye (the spike is the
largest value, the worst row the largest lag); the real-data test is in
tests/inputs/pod/test_load.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from xlaprof.tables import bounded


def test_each_range_keeps_its_fastest_and_slowest_so_a_spike_stays() -> None:
    # GIVEN 1,000 flat values with one spike and one dip, in two ranges of positions
    values = np.full(1000, 10.0)
    values[123], values[877] = 99.0, 1.0
    # WHEN each of two ranges keeps its extremes
    kept = bounded.bucket_extremes(values, 2)
    # THEN the spike and the dip are kept, with one flat value for the other end of each range
    assert 123 in kept and 877 in kept
    assert len(kept) == 4 and list(kept) == sorted(kept)


def test_a_range_of_values_not_measured_keeps_one_row() -> None:
    kept = bounded.bucket_extremes(np.array([np.nan, np.nan, 5.0, 6.0]), 2)
    assert list(kept) == [0, 2, 3]


def _timeline(steps: int) -> pd.DataFrame:
    walls = 0.010 + 0.001 * (np.arange(steps) % 7)
    walls[steps // 2] = 0.5  # one slow step in the middle
    return pd.DataFrame({"step": np.arange(steps), "wall_s": walls, "source": ["trace"] * steps})


def test_a_timeline_at_its_bound_is_kept_whole() -> None:
    timeline = _timeline(bounded.MAX_TIMELINE_ROWS)
    kept, told = bounded.thin_timeline(timeline, 2, median_step=5)
    assert kept is timeline and told is None


def test_a_long_timeline_keeps_its_first_steps_the_median_and_the_slowest() -> None:
    # GIVEN 45,000 steps, the slowest in the middle, the median step late
    timeline = _timeline(45_000)
    # WHEN it is cut
    kept, told = bounded.thin_timeline(timeline, 2, median_step=44_000)
    # THEN it is within its bound and says so
    assert told is not None and len(kept) <= bounded.MAX_TIMELINE_ROWS
    assert (told.total, told.kept, told.first_step, told.last_step) == (
        45_000,
        len(kept),
        0,
        44_999,
    )
    steps = set(kept["step"])
    assert set(range(bounded.TIMELINE_FIRST_STEPS)) <= steps
    assert 44_000 in steps and 22_500 in steps  # the median step, the slow one
    # the rows are the table's own, steps in order
    assert kept["step"].is_monotonic_increasing
    assert kept.equals(timeline.loc[kept.index])


def test_first_and_worst_keeps_the_first_rows_the_ones_asked_for_and_the_worst() -> None:
    table = pd.DataFrame({"step": range(10), "behind_ms": [0, 0, 5, 1, 9, 0, 7, np.nan, 3, 2]})
    kept = bounded.first_and_worst(table, "behind_ms", limit=5, first=2, also=[9])
    assert list(kept) == [0, 1, 4, 6, 9]


@pytest.mark.parametrize("steps", [3, bounded.MAX_HEATMAP_STEPS])
def test_a_heat_map_of_few_steps_draws_every_step(steps: int) -> None:
    late = pd.DataFrame({"step": range(steps), "device": "host", "behind_ms": 1.0})
    assert bounded.heatmap_steps(late, "host", np.arange(steps)) is None


def test_a_long_heat_map_draws_the_first_steps_and_the_furthest_behind() -> None:
    steps = 2000
    behind = np.zeros(steps)
    behind[1500] = 40.0
    late = pd.DataFrame({"step": np.arange(steps), "device": "host", "behind_ms": behind})
    other = late.assign(device="TPU:0", behind_ms=100.0)  # another device's rows: not its
    drawn = bounded.heatmap_steps(pd.concat([late, other]), "host", np.arange(steps))
    assert drawn is not None and len(drawn) == bounded.MAX_HEATMAP_STEPS
    assert 1500 in drawn and set(range(bounded.HEATMAP_FIRST_STEPS)) <= set(drawn)
