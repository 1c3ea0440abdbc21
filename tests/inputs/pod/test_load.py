"""Loading a pod's captures (``xlaprof.inputs.pod``): per-host workers summarize each host
into a cache beside its capture, lazily as one frame per host, the same as in memory.

The hosts are copies of a real CPU capture (``builders.write_pod_host``), repeated so each holds
six steps. Expected values are read from the written XSpaces themselves (StepMarker end times),
never from what xlaprof printed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import POD_COPIES, marker_walls, pod_logdir
from helpers import cli

from xlaprof.errors import BadCapture
from xlaprof.inputs import pod
from xlaprof.inputs.traces import load_trace


def test_lazy_load_matches_the_in_memory_one(tmp_path: Path) -> None:
    markers = pod_logdir(tmp_path, 3)
    lazy = load_trace(tmp_path, lazy=True, workers=2)
    eager = load_trace(tmp_path, lazy=False)
    assert lazy.source is not None and eager.source is None
    assert lazy.hosts == eager.hosts == ["host-0", "host-1", "host-2"]
    assert lazy.events.npartitions == 3  # one partition per host
    # every host's events are in its cache, beside its capture
    for summary in lazy.source.load.summaries:
        assert Path(summary.cache).parent == Path(summary.path).parent
        assert summary.events == int((eager.events["host"] == summary.host).sum())
    steps = pod.host_steps(lazy)
    key = ["host", "device", "step"]
    assert (
        steps.sort_values(key)
        .reset_index(drop=True)
        .equals(pod.host_steps(eager).sort_values(key).reset_index(drop=True))
    )
    # step walls are the marker-to-marker times of the capture itself
    host_rows = steps[steps["device"] == "host"]
    mine = host_rows[host_rows["host"] == "host-1"].set_index("step")["wall_ms"]
    for step, wall in marker_walls(markers["host-1"]).items():
        assert mine[step] == pytest.approx(wall, abs=1e-6)
    # filters apply before events are read, and mean the same in both modes
    window = (markers["host-2"][1], markers["host-2"][2])
    for filters in (
        {"hosts": ["host-2"], "steps": [2, 3]},
        {"names": ["StepMarker"]},
        {"hosts": ["host-0"], "start_ns": window[0], "end_ns": window[1]},
    ):
        got, want = lazy.select(**filters), eager.select(**filters)
        assert len(got) == len(want) > 0
        assert sorted(got["start_ns"]) == sorted(want["start_ns"])
    assert len(lazy.events[lazy.events["name"] == "StepMarker"].compute()) == 3 * 2 * POD_COPIES
    # a second load reads the summaries back from the caches
    again = load_trace(tmp_path, lazy=True, workers=1)
    assert all(s.cache_hit for s in again.source.load.summaries)
    assert (
        pod.host_steps(again)
        .sort_values(key)
        .reset_index(drop=True)
        .equals(steps.sort_values(key).reset_index(drop=True))
    )


def test_every_host_broken_is_an_input_error(tmp_path: Path) -> None:
    session = tmp_path / "plugins" / "profile" / "session"
    session.mkdir(parents=True)
    for i in range(2):
        (session / f"host-{i}.xplane.pb").write_bytes(b"\xff\xff\xff\xff")
    out = cli("analyze", str(tmp_path), env={"XLAPROF_LAZY_BYTES": "0"})
    assert out.returncode == BadCapture.exit_code, out.stderr
    assert "every capture file is unreadable" in out.stderr and "Traceback" not in out.stderr
