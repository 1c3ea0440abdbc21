"""The per-host Parquet cache (``xlaprof.inputs.pod.cache``): a cache someone sends you cannot
write through a link, fake another capture's numbers, or crash the analysis (issue 31).

Each attack is made in ``tmp_path`` and run through the real ``xlaprof`` command; expected
numbers come from a fresh analysis of the same capture with no cache in the way.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from builders import pod_env, two_pod_hosts, write_pod_host
from fuzzing import CALL_LIMIT_S, SMALL, Hang, mutate_parquet_cache, time_limit
from helpers import MI300, analyzed_inputs, cli, sample_capture, shared_trace

from xlaprof.parse.xplane import read_xspace


def _host_walls(document: dict) -> dict[tuple[str, int], float]:
    rows = document["trace"]["device_steps"]
    return {(r["host"], r["step"]): r["wall_s"] for r in rows if r["step"] is not None}


def _analyze(root: Path, env: dict[str, str]) -> tuple[int, dict | None, str]:
    out = cli("analyze", str(root), "--json", "--workers", "1", env=env)
    document = json.loads(out.stdout) if out.returncode == 0 else None
    return out.returncode, document, out.stderr


# -- 1, 5: the Parquet cache ------------------------------------------------------------------
def test_planted_links_never_receive_the_cache(tmp_path: Path) -> None:
    # GIVEN a logdir whose folder holds links named like the cache and like every temporary
    # name an older xlaprof used (one per pid), all pointing at a file of the user's
    session = two_pod_hosts(tmp_path / "logdir")
    victim = tmp_path / "bashrc"
    victim.write_text("export PATH=/usr/bin\n")
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())  # the next pids come here
    for pid in range(last, last + 3000):
        for host in ("host-0", "host-1"):
            (session / f".{host}.xplane.pb.xlaprof.parquet.{pid}.tmp").symlink_to(victim)
    (session / "host-1.xplane.pb.xlaprof.parquet").symlink_to(victim)
    # WHEN the logdir is analyzed
    code, document, stderr = _analyze(tmp_path / "logdir", pod_env(tmp_path))
    # THEN the victim is untouched, the link at the cache path is left alone (not written
    # through, not reused), and the analysis has both hosts
    assert code == 0, stderr
    assert victim.read_text() == "export PATH=/usr/bin\n"
    assert (session / "host-1.xplane.pb.xlaprof.parquet").is_symlink()
    assert document["trace"]["hosts"] == ["host-0", "host-1"]
    caches = {h["host"]: h["cache"] for h in document["trace"]["pod"]["hosts"]}
    assert Path(caches["host-1"]).parent == tmp_path / "home" / ".cache" / "xlaprof"
    assert not Path(caches["host-0"]).is_symlink()


def test_a_planted_cache_of_another_capture_is_not_believed(tmp_path: Path) -> None:
    # GIVEN a capture that is slower than its neighbour, and beside it the cache of the
    # neighbour (stamp and all: what an attacker computes from the files they ship)
    session = tmp_path / "logdir" / "plugins" / "profile" / "session"
    write_pod_host(session / "host-0.xplane.pb")
    write_pod_host(session / "host-1.xplane.pb", stretch=1.5)
    env = pod_env(tmp_path)
    code, truth, stderr = _analyze(tmp_path / "logdir", env)
    assert code == 0, stderr
    shutil.copy(
        session / "host-0.xplane.pb.xlaprof.parquet", session / "host-1.xplane.pb.xlaprof.parquet"
    )
    # WHEN it is analyzed again
    code, document, stderr = _analyze(tmp_path / "logdir", env)
    # THEN the numbers are the capture's own, and the rebuilt cache is said once
    assert code == 0, stderr
    assert _host_walls(document) == _host_walls(truth)
    said = [line for line in stderr.splitlines() if "host-1.xplane.pb.xlaprof.parquet" in line]
    assert len(said) == 1 and "cache not reused" in said[0] and "rebuilt" in said[0]


def _varint_bytes(value: int) -> int:
    """How many bytes protobuf's varint takes for ``value``."""
    return max(1, (value.bit_length() + 6) // 7)


def _same_size_other_capture(path: Path) -> None:
    """Rewrite ``path`` as a different capture of the same size and mtime (``cp -p``): its
    host events longer."""
    info = path.stat()
    space = read_xspace(path)
    host = next(p for p in space.planes if p.name == "/host:CPU")
    for line in host.lines:
        for event in line.events:
            # every host event an eighth longer (other step and busy times), where its
            # duration's varint keeps its length
            longer = event.duration_ps + event.duration_ps // 8
            if _varint_bytes(longer) == _varint_bytes(event.duration_ps):
                event.duration_ps = longer
    data = space.SerializeToString()
    assert len(data) == info.st_size  # durations stay within their varint length
    path.write_bytes(data)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def test_a_capture_replaced_with_size_and_mtime_kept_is_read_again(tmp_path: Path) -> None:
    # GIVEN an analyzed (cached) logdir whose capture is then replaced by a different one of
    # the same size and modification time
    session = two_pod_hosts(tmp_path / "logdir")
    env = pod_env(tmp_path)
    code, before, stderr = _analyze(tmp_path / "logdir", env)
    assert code == 0, stderr
    _same_size_other_capture(session / "host-0.xplane.pb")
    fresh = tmp_path / "fresh"
    shutil.copytree(tmp_path / "logdir", fresh, ignore=shutil.ignore_patterns("*.parquet"))
    _, truth, _ = _analyze(fresh, env)
    # WHEN it is analyzed again
    code, document, stderr = _analyze(tmp_path / "logdir", env)
    # THEN the numbers are the new capture's, not the cache's
    assert code == 0, stderr
    assert _host_walls(document) == _host_walls(truth) != _host_walls(before)
    assert "cache not reused" in stderr


def test_a_cache_with_junk_columns_is_rebuilt_not_exit_70(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # GIVEN a cache whose stamp and summary are intact but whose columns are junk
    session = two_pod_hosts(tmp_path / "logdir")
    env = pod_env(tmp_path)
    code, truth, stderr = _analyze(tmp_path / "logdir", env)
    assert code == 0, stderr
    cache = session / "host-0.xplane.pb.xlaprof.parquet"
    table = pq.read_table(cache)
    junk = pa.table({name: pa.array(["junk"] * table.num_rows) for name in table.column_names})
    pq.write_table(junk.replace_schema_metadata(table.schema.metadata), cache)
    # WHEN analyzed twice
    code, document, stderr = _analyze(tmp_path / "logdir", env)
    again, document_again, stderr_again = _analyze(tmp_path / "logdir", env)
    # THEN the first analysis rebuilds it and says so once; the next reuses the rebuilt one
    assert code == 0 and again == 0, stderr + stderr_again
    assert _host_walls(document) == _host_walls(document_again) == _host_walls(truth)
    assert stderr.count("cache not reused") == 1
    assert "cache not reused" not in stderr_again


def test_a_cache_edited_in_place_with_schema_and_rows_kept_is_rebuilt(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    # GIVEN the caches of one host edited in place: every float value ten times larger, the
    # columns, types, row counts, metadata and stamp kept (issue 48: a host silently became
    # the straggler, the stamp covered only the schema and the row count)
    session = two_pod_hosts(tmp_path / "logdir")
    env = pod_env(tmp_path)
    code, truth, stderr = _analyze(tmp_path / "logdir", env)
    assert code == 0, stderr
    edited = 0
    for cache in sorted(session.glob("host-0.xplane.pb.xlaprof*.parquet")):
        table = pq.read_table(cache)
        columns = [
            pc.multiply(column, 10.0) if pa.types.is_floating(column.type) else column
            for column in table.columns
        ]
        if any(pa.types.is_floating(c.type) for c in table.columns):
            edited += 1
        changed = pa.Table.from_arrays(columns, schema=table.schema)
        pq.write_table(changed, cache)
    assert edited >= 2
    # WHEN analyzed again
    code, document, stderr = _analyze(tmp_path / "logdir", env)
    # THEN the edit is seen: the caches are rebuilt (said once) and the walls are the capture's
    assert code == 0, stderr
    assert "cache not reused" in stderr
    assert _host_walls(document) == _host_walls(truth)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away needs root")
def test_a_cache_owned_by_someone_else_is_not_trusted(tmp_path: Path) -> None:
    # GIVEN a valid cache that another user owns (a tarball extracted as root keeps owners)
    session = two_pod_hosts(tmp_path / "logdir")
    env = pod_env(tmp_path)
    assert _analyze(tmp_path / "logdir", env)[0] == 0
    os.chown(session / "host-0.xplane.pb.xlaprof.parquet", 4242, 4242)
    # WHEN analyzed
    code, _, stderr = _analyze(tmp_path / "logdir", env)
    # THEN it is rebuilt, and the reason is said
    assert code == 0, stderr
    assert "owned by another user" in stderr


def test_pod_cache_damage_is_a_miss_never_a_crash_or_a_wrong_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xlaprof.inputs import pod
    from xlaprof.inputs.traces import load_trace

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the cache key lives there
    session = tmp_path / "logdir" / "plugins" / "profile" / "1"
    for host in ("host-0", "host-1"):
        write_pod_host(session / f"{host}.xplane.pb")
    key = ["host", "device", "step"]

    def steps() -> object:
        trace = load_trace(tmp_path / "logdir", lazy=True, workers=1)
        return pod.host_steps(trace).sort_values(key).reset_index(drop=True)

    truth = steps()
    cache = session / "host-0.xplane.pb.xlaprof.parquet"
    good = cache.read_bytes()
    crashes: dict[str, tuple[int, str]] = {}
    for seed in range(SMALL):
        rng = random.Random(seed)
        how, damaged = mutate_parquet_cache(rng, good)
        cache.write_bytes(damaged)
        try:
            with time_limit(CALL_LIMIT_S):
                got = steps()
            assert got.equals(truth), "other numbers than the capture's"
        except (Exception, Hang) as error:  # XlaprofError included: a damaged cache is a miss
            crashes.setdefault(f"{type(error).__name__}: {error}"[:160], (seed, how))
        cache.write_bytes(good)
    assert not crashes, "\n".join(f"{k} (seed {s}, {h})" for k, (s, h) in crashes.items())


# -- what a cache holds ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "capture",
    [lambda: sample_capture("healthy_loop"), lambda: shared_trace(MI300)],
    ids=["cpu-run", "mi300-gpu"],
)
def test_a_cache_reads_back_the_frames_it_was_written_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capture: object
) -> None:
    import pandas as pd
    import pyarrow.parquet as pq

    from xlaprof.inputs.pod.plain import decode, encode
    from xlaprof.inputs.pod.summary import read_host_events, summarize_capture, summarize_events
    from xlaprof.model.ondisk import HOST_STEPS
    from xlaprof.model.pod import CachedEvents, HostSummary

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the cache key lives there
    # GIVEN a real capture (a CPU run of the repository's; a GPU capture with device planes)
    assert callable(capture)
    source = capture()
    path = tmp_path / source.name
    shutil.copyfile(source, path)
    # WHEN a pod worker summarizes it into its cache
    summary = summarize_capture(path)
    assert summary.cache is not None and not summary.cache_hit
    # THEN its events read back are the frame the worker decoded: every column but args, in
    # order, the same dtypes (categoricals, nullable integers) and values
    events, bounds = read_host_events(path)
    written = events.drop(columns="args")
    written.attrs = {}
    back = CachedEvents(caches={summary.host: summary.cache}).select()
    pd.testing.assert_frame_equal(back, written, check_exact=True)
    # (as the file itself holds it: what pyarrow reads of it, with no help from xlaprof)
    stored = pq.read_table(summary.cache).to_pandas()
    pd.testing.assert_frame_equal(stored, written, check_exact=True)
    # AND each per-step table reads back as made (the straggler rows sorted by step)
    _, tables = summarize_events(events, bounds, path)
    assert sorted(summary.tables) == sorted(tables)
    for name, rows in tables.items():
        if name == HOST_STEPS:
            rows = rows.sort_values(["step", "device"], kind="stable", ignore_index=True)
        stored = pq.read_table(summary.tables[name]).to_pandas()
        pd.testing.assert_frame_equal(stored, rows, check_exact=True, obj=name)
    # AND a second worker trusts the cache and finds the same summary in it: its small tables
    # are the frames the first worker made, dtypes included (text as Python objects, lists as
    # lists), and so are they as a dask worker's answer carries them (plain.encode/decode)
    again = summarize_capture(path)
    assert again.cache_hit and again.aggregates == summary.aggregates
    sent = decode(encode(summary))
    assert isinstance(sent, HostSummary)
    for got in (again, sent):
        assert got.device is not None and summary.device is not None
        for name in ("devices", "ops", "utilization", "bottleneck_by_device"):
            want = getattr(summary.device, name)
            pd.testing.assert_frame_equal(getattr(got.device, name), want, check_exact=True)
    assert len(summary.device.ops) > 0


def test_a_pod_read_again_from_its_caches_is_the_pod_read_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pandas as pd

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the cache key lives there
    monkeypatch.setenv("XLAPROF_LAZY_BYTES", "0")  # a pod, read by workers into caches
    # GIVEN a pod of two real CPU captures: two runs' trace windows, copied unchanged as the
    # two hosts of one session
    session = tmp_path / "logdir" / "plugins" / "profile" / "session"
    session.mkdir(parents=True)
    for number, run in enumerate(("healthy_loop", "host_sync_item")):
        shutil.copyfile(sample_capture(run), session / f"host-{number}.xplane.pb")

    def analyzed() -> Any:
        made = analyzed_inputs(tmp_path / "logdir")
        hits = [host["cache_hit"] for host in made.result.trace_json["pod"]["hosts"]]
        return made, hits

    # WHEN it is analyzed fresh (each host's cache written), then again (read from them)
    (fresh, written), (again, read) = analyzed(), analyzed()
    assert written == [False, False] and read == [True, True]
    # THEN every table of the two results is the same frame, dtypes included: the figures'
    # tables (device_ops: the top ops; device_steps) and the device model's small tables
    fresh_frames, again_frames = fresh.result.frames, again.result.frames
    assert sorted(again_frames) == sorted(fresh_frames) and "device_ops" in fresh_frames
    assert len(fresh_frames["device_ops"]) > 0
    for name, frame in fresh_frames.items():
        pd.testing.assert_frame_equal(again_frames[name], frame, check_exact=True, obj=name)
    for name in ("devices", "ops", "utilization", "bottleneck_by_device"):
        want = getattr(fresh.trace.summary(), name)
        got = getattr(again.trace.summary(), name)
        pd.testing.assert_frame_equal(got, want, check_exact=True, obj=name)


def test_a_capture_rewritten_while_its_worker_runs_is_not_cached_as_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker signs its cache with the fingerprint of the bytes it decoded: a capture
    rewritten after it was read (a run still writing it) is read again next time, not answered
    from a cache of the old bytes under the new file's name."""
    from xlaprof.inputs.pod import summary as pod_summary

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the cache key lives there
    # GIVEN a real capture, rewritten as another capture (other step times) just after the
    # worker read it, before its cache is written
    path = tmp_path / "host-0.xplane.pb"
    shutil.copyfile(sample_capture("healthy_loop"), path)
    decode = pod_summary.summarize_events

    def rewritten_meanwhile(*args: Any, **kwargs: Any) -> Any:
        _same_size_other_capture(path)
        return decode(*args, **kwargs)

    monkeypatch.setattr(pod_summary, "summarize_events", rewritten_meanwhile)
    first = pod_summary.summarize_capture(path)
    monkeypatch.setattr(pod_summary, "summarize_events", decode)
    assert first.cache is not None and not first.cache_hit
    # WHEN the (rewritten) capture is summarized again
    again = pod_summary.summarize_capture(path)
    # THEN its cache is not reused: it holds the old bytes' events, and the new ones are read
    assert not again.cache_hit
    fresh = pod_summary.summarize_capture(path)
    assert fresh.cache_hit and fresh.aggregates == again.aggregates != first.aggregates
