"""Which host holds each step back, and what it waited on (``xlaprof.tables.stragglers``).

The hosts are copies of a real CPU capture (``builders.write_pod_host``); a slower host is a
genuinely different capture, its events stretched in time, with collective events where its
extra time went. Expected values are read from the written XSpaces (StepMarker end times).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import STRETCH, host_rows, marker_walls, pod_logdir

from xlaprof.inputs import pod
from xlaprof.inputs.traces import load_trace
from xlaprof.tables.stragglers import stragglers


def test_straggler_doing_its_own_work(tmp_path: Path) -> None:
    markers = pod_logdir(tmp_path, 4, {"host-2": {"stretch": STRETCH}})
    trace = load_trace(tmp_path, lazy=True, workers=2)
    table = host_rows(stragglers(pod.host_steps(trace)))
    slow, normal = marker_walls(markers["host-2"]), marker_walls(markers["host-0"])
    for step in slow:
        row = table.loc[step]
        assert row["slowest_host"] == "host-2" and row["hosts"] == 4
        assert row["slowest_ms"] == pytest.approx(slow[step], abs=1e-6)
        assert row["median_ms"] == pytest.approx(normal[step], abs=1e-6)
        assert row["behind_ms"] == pytest.approx(slow[step] - normal[step], abs=1e-6)
        assert row["waiting_on"] == "host work" and row["cause_host"] == "host-2"


def test_straggler_waiting_on_a_collective(tmp_path: Path) -> None:
    markers = pod_logdir(tmp_path, 3, {"host-1": {"stretch": STRETCH, "collective_share": 0.9}})
    table = host_rows(stragglers(pod.host_steps(load_trace(tmp_path, lazy=True, workers=2))))
    slow = marker_walls(markers["host-1"])
    for step in slow:
        row = table.loc[step]
        assert row["slowest_host"] == "host-1"
        assert row["collective_ms"] == pytest.approx(0.9 * slow[step], rel=1e-6)
        assert row["waiting_on"] == "collective"
        assert row["cause_host"] != "host-1"  # it waited for another host
