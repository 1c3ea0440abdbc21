"""Step time skew between hosts (``xlaprof.tables.hosts``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers import sample_capture

from xlaprof.inputs.traces import load_trace
from xlaprof.tables.hosts import host_skew

RUN = "recompile_varying_batch"


def test_many_hosts_load_in_parallel_and_show_skew(tmp_path: Path) -> None:
    source = sample_capture(RUN)
    session = tmp_path / "plugins" / "profile" / "2026_01_01"
    session.mkdir(parents=True)
    for host in ("host-a_8466", "host-b_8466", "host-c_8466"):
        shutil.copy(source, session / f"{host}.xplane.pb")
    trace = load_trace(tmp_path, workers=2)
    assert trace.hosts == ["host-a:8466", "host-b:8466", "host-c:8466"]
    counts = trace.events.groupby("host", observed=True).size()
    assert counts.nunique() == 1  # the same capture three times
    skew = host_skew(trace.step_times())
    assert list(skew["skew"]) == [0.0, 0.0] and set(skew["hosts"]) == {3}
