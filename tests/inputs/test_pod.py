"""Pod-scale traces: per-host workers, the Parquet cache, dask, stragglers, a broken host.

The hosts are copies of a real CPU capture (sample_traces), repeated so each holds six steps. A
slower host is a genuinely different capture: its XSpace rewritten with every event's time
stretched (the protobuf classes of parse/xplane.py), optionally with collective events where its
extra time went. Expected values are read from the written XSpaces themselves (StepMarker end
times), never from what xlaprof printed.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest
from helpers import SAMPLES, cli

from xlaprof.errors import BadCapture
from xlaprof.inputs import pod
from xlaprof.inputs.traces import load_trace
from xlaprof.parse.xplane.schema import read_xspace, xspace_class
from xlaprof.tables.stragglers import stragglers

SOURCE = next((SAMPLES / "runs" / "healthy_loop").glob("*/plugins/profile/*/*.xplane.pb"))
COPIES = 3  # the sample holds two steps; three copies give six
STRETCH = 1.5


def _write_host(
    path: Path, stretch: float = 1.0, collective_share: float | None = None
) -> list[int]:
    """Write a host's capture; return its StepMarker end times (ns, absolute).

    ``stretch`` multiplies every event's absolute time and duration (a host slower at
    everything). ``collective_share`` adds an ``all-reduce`` event covering that share of each
    step after the first (a host whose extra time went to waiting on a collective).
    """
    source = read_xspace(SOURCE)
    space = xspace_class()()
    space.CopyFrom(source)
    ends_ps = [
        line.timestamp_ns * 1000 + e.offset_ps + e.duration_ps
        for plane in source.planes
        for line in plane.lines
        for e in line.events
    ]
    span = max(ends_ps) + 1  # one copy's length (ps), the same shift on every line
    markers: list[int] = []
    for plane in space.planes:
        names = {k: m.name for k, m in plane.event_metadata.items()}
        for line in plane.lines:
            base = line.timestamp_ns * 1000
            originals = list(line.events)
            del line.events[:]
            for copy in range(COPIES):
                for event in originals:
                    start = round((base + event.offset_ps + copy * span) * stretch)
                    added = line.events.add(
                        metadata_id=event.metadata_id,
                        offset_ps=start - base,
                        duration_ps=round(event.duration_ps * stretch),
                    )
                    added.stats.extend(event.stats)
                    if plane.name == "/host:CPU" and names.get(event.metadata_id) == "StepMarker":
                        markers.append((start + added.duration_ps) // 1000)
    markers.sort()
    if collective_share is not None:
        host = next(p for p in space.planes if p.name == "/host:CPU")
        key = max(host.event_metadata) + 1
        host.event_metadata[key].id, host.event_metadata[key].name = key, "all-reduce.7"
        line = host.lines.add(id=999, name="collectives", timestamp_ns=0)
        for begin, end in itertools.pairwise(markers):
            line.events.add(
                metadata_id=key,
                offset_ps=begin * 1000,
                duration_ps=round((end - begin) * collective_share) * 1000,
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(space.SerializeToString())
    return markers


def _logdir(root: Path, hosts: int, slow: dict[str, dict] | None = None) -> dict[str, list[int]]:
    session = root / "plugins" / "profile" / "session"
    markers = {}
    for i in range(hosts):
        name = f"host-{i}"
        markers[name] = _write_host(session / f"{name}.xplane.pb", **(slow or {}).get(name, {}))
    return markers


def _walls(markers: list[int]) -> dict[int, float]:
    """Step -> wall (ms) for marker-to-marker steps (step i ends at marker i)."""
    return {i: (b - a) / 1e6 for i, (a, b) in enumerate(itertools.pairwise(markers), start=1)}


def _host_rows(table):  # type: ignore[no-untyped-def]
    """Straggler rows of the host planes (step markers), by step."""
    return table[table["device"] == "host"].set_index("step")


def test_lazy_load_matches_the_in_memory_one(tmp_path: Path) -> None:
    markers = _logdir(tmp_path, 3)
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
    for step, wall in _walls(markers["host-1"]).items():
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
    assert len(lazy.events[lazy.events["name"] == "StepMarker"].compute()) == 3 * 2 * COPIES
    # a second load reads the summaries back from the caches
    again = load_trace(tmp_path, lazy=True, workers=1)
    assert all(s.cache_hit for s in again.source.load.summaries)
    assert (
        pod.host_steps(again)
        .sort_values(key)
        .reset_index(drop=True)
        .equals(steps.sort_values(key).reset_index(drop=True))
    )


def test_straggler_doing_its_own_work(tmp_path: Path) -> None:
    markers = _logdir(tmp_path, 4, {"host-2": {"stretch": STRETCH}})
    trace = load_trace(tmp_path, lazy=True, workers=2)
    table = _host_rows(stragglers(pod.host_steps(trace)))
    slow, normal = _walls(markers["host-2"]), _walls(markers["host-0"])
    for step in slow:
        row = table.loc[step]
        assert row["slowest_host"] == "host-2" and row["hosts"] == 4
        assert row["slowest_ms"] == pytest.approx(slow[step], abs=1e-6)
        assert row["median_ms"] == pytest.approx(normal[step], abs=1e-6)
        assert row["behind_ms"] == pytest.approx(slow[step] - normal[step], abs=1e-6)
        assert row["waiting_on"] == "host work" and row["cause_host"] == "host-2"


def test_straggler_waiting_on_a_collective(tmp_path: Path) -> None:
    markers = _logdir(tmp_path, 3, {"host-1": {"stretch": STRETCH, "collective_share": 0.9}})
    table = _host_rows(stragglers(pod.host_steps(load_trace(tmp_path, lazy=True, workers=2))))
    slow = _walls(markers["host-1"])
    for step in slow:
        row = table.loc[step]
        assert row["slowest_host"] == "host-1"
        assert row["collective_ms"] == pytest.approx(0.9 * slow[step], rel=1e-6)
        assert row["waiting_on"] == "collective"
        assert row["cause_host"] != "host-1"  # it waited for another host


def test_cli_names_a_broken_host_and_analyzes_the_rest(tmp_path: Path) -> None:
    markers = _logdir(tmp_path, 3, {"host-0": {"stretch": STRETCH}})
    broken = tmp_path / "plugins" / "profile" / "session" / "host-9.xplane.pb"
    broken.write_bytes(b"\xff\xff\xff\xff not an XSpace")
    out = cli("analyze", str(tmp_path), "--json", "--workers", "2", env={"XLAPROF_LAZY_BYTES": "0"})
    assert out.returncode == 0, out.stderr
    assert "host-9" in out.stderr and str(broken) in out.stderr
    document = json.loads(out.stdout)
    load = document["trace"]["pod"]
    assert [e["host"] for e in load["errors"]] == ["host-9"]
    assert sorted(h["host"] for h in load["hosts"]) == ["host-0", "host-1", "host-2"]
    rows = {r["step"]: r for r in document["stragglers"] if r["device"] == "host"}
    for step, wall in _walls(markers["host-0"]).items():
        assert rows[step]["slowest_host"] == "host-0"
        assert rows[step]["slowest_ms"] == pytest.approx(wall, abs=1e-6)
    html_file = tmp_path / "report.html"
    out = cli("report", str(tmp_path), "-o", str(html_file), env={"XLAPROF_LAZY_BYTES": "0"})
    assert out.returncode == 0, out.stderr
    assert 'id="fig-host-steps"' in html_file.read_text()


def test_every_host_broken_is_an_input_error(tmp_path: Path) -> None:
    session = tmp_path / "plugins" / "profile" / "session"
    session.mkdir(parents=True)
    for i in range(2):
        (session / f"host-{i}.xplane.pb").write_bytes(b"\xff\xff\xff\xff")
    out = cli("analyze", str(tmp_path), env={"XLAPROF_LAZY_BYTES": "0"})
    assert out.returncode == BadCapture.exit_code, out.stderr
    assert "every capture file is unreadable" in out.stderr and "Traceback" not in out.stderr


def test_distributed_path_on_a_local_cluster(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    markers = _logdir(tmp_path, 3, {"host-0": {"stretch": STRETCH}})
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        worker_pids = set(client.run(os.getpid).values())
        trace = load_trace(tmp_path, scheduler=cluster.scheduler_address)
        load = trace.source.load
        assert load.scheduler == cluster.scheduler_address and load.workers == 2
        assert {int(s.worker.rsplit(":", 1)[1]) for s in load.summaries} <= worker_pids
    assert trace.hosts == ["host-0", "host-1", "host-2"]
    table = _host_rows(stragglers(pod.host_steps(trace)))
    for step, wall in _walls(markers["host-0"]).items():
        assert table.loc[step, "slowest_host"] == "host-0"
        assert table.loc[step, "slowest_ms"] == pytest.approx(wall, abs=1e-6)
    # events on demand, as a dask DataFrame over the caches the cluster wrote
    assert type(trace.events).__module__.startswith("dask")
    assert len(trace.select(hosts=["host-1"], names=["StepMarker"])) == 2 * COPIES


def test_the_json_document_keeps_the_first_step_rows_and_counts_them_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xlaprof.report import json_out

    # GIVEN four hosts of six steps, and a document cap below their rows
    _logdir(tmp_path, 4)
    trace = load_trace(tmp_path, lazy=True, workers=2)
    every_step = trace.device_steps()
    every_tracing = trace.tracing_vs_device()
    assert len(every_step) > 10 and len(every_tracing) > 10
    monkeypatch.setattr(json_out, "MAX_STEP_ROWS", 10)
    # WHEN the trace object is written
    document = json_out.trace_json(trace)
    # THEN the totals are every row, and the rows kept are the first ones, hosts in order
    assert document["device_steps_total"] == len(every_step)
    assert document["tracing_total"] == len(every_tracing)
    kept = [(r["host"], r["device"], r["step"]) for r in document["device_steps"]]
    first = every_step.head(10)
    assert kept == list(zip(first["host"], first["device"], first["step"], strict=True))
    assert len(document["tracing"]) == 10
