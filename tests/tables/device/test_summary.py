"""One host's capture reduced to a ``DeviceSummary``, several merged
(``xlaprof.tables.device.summary``): what a pod's per-host workers do."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlaprof.inputs.traces import load_trace
from xlaprof.tables import device as device_model


def test_per_host_summaries_merge_to_the_whole(two_hosts: Path) -> None:
    # GIVEN each host's capture reduced on its own (as a pod's per-host workers will)
    whole = load_trace(two_hosts).summary()
    files = sorted(two_hosts.rglob("*.xplane.pb"))
    parts = []
    for file in files:
        trace = load_trace(file)
        parts.append(device_model.summarize_host(trace.events, trace.devices, trace.step_bounds))
    merged = device_model.merge_summaries(parts)
    # THEN the merged tables hold the same rows as the summary of both hosts at once
    columns = ["host", "device", "step", "wall_s", "busy_s", "idle_s"]
    key = ["host", "device", "step"]
    mine = merged.steps[columns].sort_values(key, ignore_index=True)
    both = whole.steps[columns].sort_values(key, ignore_index=True)
    assert mine.equals(both)
    assert merged.ops["total_s"].sum() == pytest.approx(whole.ops["total_s"].sum())
    assert merged.events == sum(len(load_trace(f).events) for f in files)
