"""Reading a pod's hosts on a dask cluster (``xlaprof.inputs.pod.cluster``): only when one is
named, every call under one timeout, a bad address or a silent scheduler one line and its exit
code (issue 31)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from builders import (
    POD_COPIES,
    STRETCH,
    host_rows,
    marker_walls,
    pod_env,
    pod_logdir,
    two_pod_hosts,
)
from helpers import cli

from xlaprof.inputs import pod
from xlaprof.inputs.traces import load_trace
from xlaprof.tables.stragglers import stragglers


def test_distributed_path_on_a_local_cluster(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    markers = pod_logdir(tmp_path, 3, {"host-0": {"stretch": STRETCH}})
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
    table = host_rows(stragglers(pod.host_steps(trace)))
    for step, wall in marker_walls(markers["host-0"]).items():
        assert table.loc[step, "slowest_host"] == "host-0"
        assert table.loc[step, "slowest_ms"] == pytest.approx(wall, abs=1e-6)
    # events on demand, as a dask DataFrame over the caches the cluster wrote
    assert type(trace.events).__module__.startswith("dask")
    assert len(trace.select(hosts=["host-1"], names=["StepMarker"])) == 2 * POD_COPIES


# -- 4: dask only when asked, every call under one timeout ---------------------------------------
def test_a_bad_scheduler_address_is_one_line_and_its_exit_code(tmp_path: Path) -> None:
    from xlaprof.errors import SchedulerError

    # GIVEN a two-host logdir
    two_pod_hosts(tmp_path / "logdir")
    logdir = str(tmp_path / "logdir")
    # WHEN the scheduler named on the command line, or in the environment, is no address
    outs = [
        cli("analyze", logdir, "--scheduler", bad)
        for bad in ("garbage", "http://127.0.0.1:8786", "inproc://x", "ucx://h:1")
    ]
    outs.append(cli("analyze", logdir, env=pod_env(tmp_path, XLAPROF_DASK_SCHEDULER="inproc://x")))
    # THEN each is one line and exit 25, never 70
    for out in outs:
        assert out.returncode == SchedulerError.exit_code, out.stderr
        errors = [line for line in out.stderr.splitlines() if line.startswith("xlaprof: error")]
        assert len(errors) == 1 and "not a dask scheduler address" in errors[0]
        assert "Traceback" not in out.stderr


def test_a_listener_that_never_answers_does_not_hang(tmp_path: Path) -> None:
    import socket
    import threading

    import dask

    from xlaprof.errors import SchedulerError

    default = dask.config.get("scheduler", None)
    # GIVEN a TCP listener that accepts connections and never says a word
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    two_pod_hosts(tmp_path / "logdir")
    port = server.getsockname()[1]
    try:
        # WHEN it is named as the scheduler, with a 3 s timeout
        out = cli(
            "analyze",
            str(tmp_path / "logdir"),
            "--scheduler",
            f"tcp://127.0.0.1:{port}",
            env=pod_env(tmp_path, XLAPROF_DASK_TIMEOUT="3"),
            timeout=300,  # a hang fails the test here instead of blocking the suite
        )
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        server.close()
    # THEN the analysis ends with one line and its exit code
    assert out.returncode == SchedulerError.exit_code, out.stderr
    assert "no dask scheduler answers" in out.stderr
    # AND the client it gave up on did not become dask's default in this process (a notebook's
    # own dask work would go to the dead address; it did, and a later test's compute failed)
    assert dask.config.get("scheduler", None) == default


def test_a_scheduler_from_the_environment_is_announced_and_no_workers_is_an_error(
    tmp_path: Path,
) -> None:
    distributed = pytest.importorskip("distributed")
    from xlaprof.errors import SchedulerError

    # GIVEN a scheduler with no workers, named only in the environment
    two_pod_hosts(tmp_path / "logdir")
    with distributed.LocalCluster(n_workers=0, dashboard_address=None) as cluster:
        # WHEN a logdir is analyzed
        out = cli(
            "analyze",
            str(tmp_path / "logdir"),
            env=pod_env(
                tmp_path,
                XLAPROF_DASK_SCHEDULER=cluster.scheduler_address,
                XLAPROF_DASK_TIMEOUT="3",
            ),
            timeout=300,
        )
    # THEN the variable is announced, and the missing workers end it with exit 25
    assert f"using the dask scheduler {cluster.scheduler_address}" in out.stderr
    assert "XLAPROF_DASK_SCHEDULER" in out.stderr
    assert out.returncode == SchedulerError.exit_code, out.stderr
    assert "has no workers" in out.stderr


# -- a hostile worker (issue 38) -------------------------------------------------------------
# The worker's task is replaced in a cluster running in this process (processes=False, over
# TCP, so every answer crosses distributed's wire format as from a remote worker).

UNPICKLED: list[str] = []


def _unpickled(marker: str) -> str:
    """What a hostile pickle runs when loaded: here, a note that it ran."""
    UNPICKLED.append(marker)
    return marker


class _Payload:
    """A result whose unpickling runs code (as any pickle may)."""

    def __reduce__(self):
        return (_unpickled, ("code ran in the xlaprof process",))


def _answers_a_pickle(path: str, **_keywords) -> object:
    return _Payload()


def _answers_junk(path: str, **_keywords) -> object:
    return b'{"format": "xlaprof.host-summary/1", "host": 3}'


@pytest.mark.parametrize(
    ("task", "said"),
    [(_answers_a_pickle, "no answer for"), (_answers_junk, "is not a host summary")],
)
def test_a_hostile_workers_answer_is_never_unpickled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, task, said: str
) -> None:
    distributed = pytest.importorskip("distributed")
    from xlaprof.errors import SchedulerError
    from xlaprof.inputs.pod import plain

    # GIVEN a cluster whose worker answers with a pickle that runs code, or with junk
    pod_logdir(tmp_path, 2)
    monkeypatch.setattr(plain, "summarize_capture_plain", task)
    UNPICKLED.clear()
    with (
        distributed.LocalCluster(
            n_workers=1, processes=False, protocol="tcp://", dashboard_address=None
        ) as cluster,
        pytest.raises(SchedulerError) as raised,
    ):
        # WHEN a pod is read on it
        load_trace(tmp_path, scheduler=cluster.scheduler_address)
    # THEN the answer is refused in one clean error, and nothing it holds was unpickled here
    assert said in str(raised.value) and "\n" not in str(raised.value)
    assert UNPICKLED == []
