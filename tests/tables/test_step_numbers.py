"""Step numbers of events (``xlaprof.tables.step_numbers``): device events take the step of
the ``Steps``-line event they fall in."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import tpu_like_xspace

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
