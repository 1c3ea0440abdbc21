"""Step numbers of events (``xlaprof.tables.step_numbers``): device events take the step of
the ``Steps``-line event they fall in."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import tpu_like_xspace
from helpers import GPU_JAX, gpu_sample, jax_cpu_sample

from xlaprof.inputs.traces import load_trace
from xlaprof.tables.timeline import step_timeline


def test_device_planes_of_a_tpu_shaped_trace(tmp_path: Path) -> None:
    path = tmp_path / "plugins" / "profile" / "t" / "tpu-vm-0.xplane.pb"
    path.parent.mkdir(parents=True)
    tpu_like_xspace(path)
    trace = load_trace(tmp_path)
    events = trace.events
    device = events[events["plane_kind"] == "device"]
    assert set(device["plane"]) == {"/device:TPU:0"}
    # device events take the step of the Steps-line event they fall in
    ops = device[device["line"] == "XLA Ops"]
    assert list(ops["step"]) == [7, 8] and list(ops["hlo_op"]) == ["fusion.1", "fusion.1"]
    assert ops["args"].iloc[0] == {"hlo_op": "fusion.1"}  # ref stat resolved to its name
    timeline = step_timeline([], events[events["plane_kind"] == "device"])
    assert list(timeline["device_busy_s"]) == pytest.approx([0.006, 0.006])  # XLA Modules


@pytest.mark.parametrize(("steps", "dtype"), [((7, 8), "Int32"), ((2**31 - 1, 2**31), "Int64")])
def test_step_numbers_are_int32_where_every_one_fits(
    tmp_path: Path, steps: tuple[int, int], dtype: str
) -> None:
    """Steps numbered as the device's Steps line names them: ``Int32`` where every number fits
    (4 bytes an event less), else ``Int64``, the numbers as named either way."""
    path = tmp_path / "plugins" / "profile" / "t" / "tpu-vm-0.xplane.pb"
    path.parent.mkdir(parents=True)
    tpu_like_xspace(path, steps=steps)
    events = load_trace(tmp_path).events
    assert str(events["step"].dtype) == dtype
    ops = events[events["line"] == "XLA Ops"]
    assert ops["step"].tolist() == list(steps)


@pytest.mark.parametrize("capture", ["jax_cpu", "gpu_jax"])
def test_events_in_time_order_get_the_steps_a_search_per_event_gives(capture: str) -> None:
    """A decoded capture's events come in start order, and are numbered a step at a time (each
    step's events are a run of them); the same events in shuffled order are looked up one by
    one (the step marked over each event's start): every event must get the same number."""
    import numpy as np
    import pandas as pd

    from xlaprof.parse.xplane import xspace_frame
    from xlaprof.tables.step_numbers import assign_steps

    path = jax_cpu_sample() if capture == "jax_cpu" else gpu_sample(GPU_JAX)
    events = xspace_frame(path)
    starts = events["start_ns"].to_numpy()
    assert (starts[1:] >= starts[:-1]).all()  # the order the merge relies on
    steps, bounds = assign_steps(events, 0)
    shuffled = events.take(np.random.default_rng(0).permutation(len(events)))
    again, bounds_again = assign_steps(shuffled, 0)
    by_row = pd.Series(again, index=shuffled.index).sort_index()
    assert by_row.notna().sum() > len(events) // 2  # most events lie in a marked step
    pd.testing.assert_series_equal(by_row, pd.Series(steps, index=events.index))
    # the same steps, listed as their marking events come
    pd.testing.assert_frame_equal(
        bounds, bounds_again.sort_values("start_ns", kind="stable", ignore_index=True)
    )
