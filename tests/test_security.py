"""A capture or run directory someone sends you cannot write, read, run or fake anything (#31).

Each test is one attack from the issue, made in ``tmp_path`` and run through the real
``xlaprof`` command in a subprocess: the test asserts what the user sees (the exit code, one
line on stderr, the document) and that nothing was written or shown that should not be.
Expected numbers come from a fresh analysis of the same capture with no cache in the way.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from helpers import cli
from test_pod import _write_host

from xlaprof.parse.xplane import read_xspace

POD = {"XLAPROF_LAZY_BYTES": "0"}  # two hosts already load through the per-host caches


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A home of the test's own: the private cache folder and its key live there."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**POD, "HOME": str(home), **extra}


def _two_hosts(root: Path) -> Path:
    session = root / "plugins" / "profile" / "session"
    for name in ("host-0", "host-1"):
        _write_host(session / f"{name}.xplane.pb")
    return session


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
    session = _two_hosts(tmp_path / "logdir")
    victim = tmp_path / "bashrc"
    victim.write_text("export PATH=/usr/bin\n")
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())  # the next pids come here
    for pid in range(last, last + 3000):
        for host in ("host-0", "host-1"):
            (session / f".{host}.xplane.pb.xlaprof.parquet.{pid}.tmp").symlink_to(victim)
    (session / "host-1.xplane.pb.xlaprof.parquet").symlink_to(victim)
    # WHEN the logdir is analyzed
    code, document, stderr = _analyze(tmp_path / "logdir", _env(tmp_path))
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
    _write_host(session / "host-0.xplane.pb")
    _write_host(session / "host-1.xplane.pb", stretch=1.5)
    env = _env(tmp_path)
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


def _same_size_other_capture(path: Path) -> None:
    """Rewrite ``path`` as a different capture of the same size and mtime (``cp -p``)."""
    info = path.stat()
    space = read_xspace(path)
    host = next(p for p in space.planes if p.name == "/host:CPU")
    names = {k: m.name for k, m in host.event_metadata.items()}
    for line in host.lines:
        for event in line.events:
            if names.get(event.metadata_id) == "StepMarker":
                event.duration_ps += 10**9 if event.duration_ps >= 10**9 else 0
    data = space.SerializeToString()
    assert len(data) == info.st_size  # durations stay within their varint length
    path.write_bytes(data)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def test_a_capture_replaced_with_size_and_mtime_kept_is_read_again(tmp_path: Path) -> None:
    # GIVEN an analyzed (cached) logdir whose capture is then replaced by a different one of
    # the same size and modification time
    session = _two_hosts(tmp_path / "logdir")
    env = _env(tmp_path)
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
    session = _two_hosts(tmp_path / "logdir")
    env = _env(tmp_path)
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


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away needs root")
def test_a_cache_owned_by_someone_else_is_not_trusted(tmp_path: Path) -> None:
    # GIVEN a valid cache that another user owns (a tarball extracted as root keeps owners)
    session = _two_hosts(tmp_path / "logdir")
    env = _env(tmp_path)
    assert _analyze(tmp_path / "logdir", env)[0] == 0
    os.chown(session / "host-0.xplane.pb.xlaprof.parquet", 4242, 4242)
    # WHEN analyzed
    code, _, stderr = _analyze(tmp_path / "logdir", env)
    # THEN it is rebuilt, and the reason is said
    assert code == 0, stderr
    assert "owned by another user" in stderr


# -- 6: terminal, markup, GitHub annotations, JUnit XML, HTML labels ---------------------------
HOSTILE = (
    "\x1b]0;pwned\x07\x1b]8;;https://evil.example\x07click\x1b]8;;\x07\x1b[8mhidden\x1b[2K\r\u202e"
)
OP_NAMES = [
    "[link=https://evil.example]op[/link]",
    "[/oops]",
    '<a href="https://evil.example">x</a><br>y',
    f"kernel{HOSTILE}",
]


def _hostile_chrome_trace(path: Path) -> None:
    """A Kineto-style trace: a GPU whose ops, process and thread carry hostile names."""
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": f"gpu{HOSTILE}"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "args": {"labels": "GPU 0"}},
        {"ph": "M", "name": "process_name", "pid": 9, "args": {"name": f"host{HOSTILE}"}},
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": 1, "args": {"name": HOSTILE}},
    ]
    ts = 1000.0
    for step in range(4):
        events.append(
            {"ph": "X", "name": f"ProfilerStep#{step}", "pid": 9, "tid": 1, "ts": ts, "dur": 900.0}
        )
        for index, name in enumerate(OP_NAMES):
            events.append(
                {
                    "ph": "X",
                    "name": name,
                    "pid": 0,
                    "tid": 7,
                    "ts": ts + 10 + index * 200,
                    "dur": 150.0 + index,
                    "cat": "kernel",
                }
            )
        ts += 1000.0
    path.write_text(json.dumps({"traceEvents": events}))


def _no_raw_controls(text: str) -> None:
    bad = [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0]
    assert not bad, f"raw control characters reached the output: {sorted(set(bad))!r}"
    assert "\u202e" not in text


def test_hostile_names_print_literally_on_the_terminal(tmp_path: Path) -> None:
    # GIVEN a capture whose op, process and thread names hold escape sequences and markup
    trace = tmp_path / "evil\x1b]0;pwned\x07\x1b[2K\r.trace.json"
    _hostile_chrome_trace(trace)
    # WHEN it is analyzed for the terminal (wide enough that names are not folded)
    out = cli("analyze", str(trace), env={"COLUMNS": "400"})
    # THEN no control character reaches the terminal, markup prints as itself, no crash
    assert out.returncode == 0, out.stderr
    _no_raw_controls(out.stdout + out.stderr)
    assert "[/oops]" in out.stdout
    assert "[link=https://evil.example]op[/link]" in out.stdout
    assert "kernel\\x1b]0;pwned" in out.stdout  # shown, visibly


def _hostile_run(tmp_path: Path, samples: Path) -> Path:
    """The recompiling sample run, its script renamed with escape sequences in the name."""
    run = tmp_path / "run"
    shutil.copytree(
        next((samples / "runs" / "recompile_varying_batch").glob("*")),
        run,
        ignore=shutil.ignore_patterns("plugins"),
    )
    evil = f"/work/main/examples/evil{HOSTILE},x:1/"
    for path in [run / "debug.log", *run.glob("graphs/*.gz")]:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        data = data.replace(b"/work/main/examples/", evil.encode())
        path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    info = json.loads((run / "run.json").read_text())
    info["device_kind"] = f"TPU{HOSTILE}"
    info["host"] = HOSTILE
    (run / "run.json").write_text(json.dumps(info))
    return run


def test_check_output_annotations_and_junit_stay_inert(tmp_path: Path, samples: Path) -> None:
    import xml.etree.ElementTree as ET

    # GIVEN a recompiling run whose source path holds ESC, BEL, CR, a comma and a colon
    run = _hostile_run(tmp_path, samples)
    junit = tmp_path / "junit.xml"
    # WHEN checked under GitHub Actions with a JUnit report
    out = cli(
        "check",
        str(run),
        "--max-recompilations",
        "0",
        "--junit",
        str(junit),
        "--no-config",
        env={"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(tmp_path)},
    )
    # THEN the budget fails as it should, nothing raw reaches the log, every annotation is
    # one well-formed command line, and the JUnit file parses
    assert out.returncode == 1, out.stderr
    _no_raw_controls(out.stdout + out.stderr)
    annotations = [line for line in out.stdout.splitlines() if line.startswith("::")]
    assert annotations and all(line.startswith("::error ") for line in annotations)
    assert "evil" in annotations[0] and "%2C" in annotations[0].split("::")[1]
    root = ET.fromstring(junit.read_bytes())
    cases = [c for c in root.iter("testcase") if c.get("file")]
    assert cases and "\\x1b]0;pwned" in cases[0].get("file")


def test_label_markup_in_names_is_not_live_in_the_html_report(tmp_path: Path) -> None:
    # GIVEN a capture with an op named as a plotly link and a line break
    trace = tmp_path / "evil.trace.json"
    _hostile_chrome_trace(trace)
    report = tmp_path / "report.html"
    # WHEN the HTML report is written
    out = cli("report", str(trace), "-o", str(report))
    # THEN the names are there as text: no live <a href> or <br> from data reaches plotly,
    # and no raw control character is in the page
    assert out.returncode == 0, out.stderr
    page = report.read_text()
    calls = page.split("Plotly.newPlot(")[1:]  # each figure's data (after plotly.js itself)
    figures = "".join(call[: call.index("</script>")] for call in calls)
    assert '<a href="https://evil' not in figures
    assert '\\u003ca href=\\"https:\\u002f\\u002fevil' not in figures
    assert (
        '&lt;a href=\\"https:\\u002f\\u002fevil.example\\"&gt;x&lt;\\u002fa&gt;&lt;br&gt;y'
        in figures
    )
    assert "\\u001b" not in figures
    _no_raw_controls(page[: page.index("<h2>Figures</h2>")] + figures)


# -- 3: source lines only from a chosen root ----------------------------------------------------
def _run_quoting(tmp_path: Path, samples: Path, cwd: str, source: str, line: int) -> Path:
    """The recompiling sample run, its changing input's source line pointed at ``source``."""
    run = tmp_path / "run"
    shutil.copytree(
        next((samples / "runs" / "recompile_varying_batch").glob("*")),
        run,
        ignore=shutil.ignore_patterns("plugins"),
    )
    for path in run.glob("graphs/*.gz"):
        data = gzip.decompress(path.read_bytes()).replace(
            b'source_file="/work/main/examples/_common.py" source_line=42',
            f'source_file="{source}" source_line={line}'.encode(),
        )
        path.write_bytes(gzip.compress(data))
    info = json.loads((run / "run.json").read_text())
    info["cwd"] = cwd
    (run / "run.json").write_text(json.dumps(info))
    return run


@pytest.mark.parametrize("cwd", ["/", "/usr/lib"])
def test_a_recorded_system_folder_is_no_source_root(
    tmp_path: Path, samples: Path, cwd: str
) -> None:
    # GIVEN a run that records a system folder as its working directory and whose graph
    # metadata names /etc/passwd as a source file
    run = _run_quoting(tmp_path, samples, cwd, "/etc/passwd", 1)
    first_line = Path("/etc/passwd").read_text().splitlines()[0]
    # WHEN it is analyzed (JSON, terminal) and reported (HTML)
    document = cli("analyze", str(run), "--json")
    console = cli("analyze", str(run), env={"COLUMNS": "300"})
    html = cli("report", str(run), "-o", str(tmp_path / "r.html"))
    # THEN no line of it is shown anywhere, and each output says so and how to allow it
    assert document.returncode == console.returncode == html.returncode == 0
    page = (tmp_path / "r.html").read_text()
    for text in (document.stdout, console.stdout, page):
        assert first_line not in text
    notes = [w for w in json.loads(document.stdout)["run"]["warnings"] if "/etc/passwd" in w]
    assert len(notes) == 1 and "not shown" in notes[0] and "--source-root" in notes[0]
    assert "not shown" in console.stdout and "--source-root" in console.stdout
    assert "not shown" in page and "--source-root" in page


def test_a_real_project_folder_is_quoted_and_only_its_python_files(
    tmp_path: Path, samples: Path
) -> None:
    # GIVEN a run whose recorded working directory is a project folder here, holding the
    # script the graph names, and one whose graph names a non-Python file of that folder
    project = tmp_path / "project"
    project.mkdir()
    (project / "model.py").write_text("x = torch.randn(batch_size, 16)  # changes per step\n")
    (project / ".env").write_text("API_TOKEN=secret-token-123\n")
    quoted = _run_quoting(tmp_path / "a", samples, str(project), str(project / "model.py"), 1)
    hidden = _run_quoting(tmp_path / "b", samples, str(project), str(project / ".env"), 1)
    # WHEN both are analyzed
    shown = cli("analyze", str(quoted), "--json")
    kept = cli("analyze", str(hidden), "--json")
    # THEN the script's line is quoted, the other file's is withheld (and said)
    assert shown.returncode == kept.returncode == 0
    assert "torch.randn(batch_size, 16)" in shown.stdout
    assert "secret-token-123" not in kept.stdout
    assert any(".env" in w for w in json.loads(kept.stdout)["run"]["warnings"])


# -- 2: xlaprof view never lets XProf's converter write outside -----------------------------------
def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _hlo_proto(name: str) -> bytes:
    """An ``HloProto`` holding only ``hlo_module.name`` (fields 1 and 1)."""
    encoded = name.encode()
    module = b"\x0a" + _varint(len(encoded)) + encoded
    return b"\x0a" + _varint(len(module)) + module


def test_view_refuses_module_names_that_escape(tmp_path: Path, samples: Path) -> None:
    from xlaprof.parse.xplane import xspace_class

    # GIVEN a real capture whose metadata plane names an HLO module ../../.. + a chosen path
    target = tmp_path / "outside" / "planted"
    target.parent.mkdir()
    source = next((samples / "runs" / "healthy_loop").glob("*/plugins/profile/*/*.xplane.pb"))
    space = xspace_class()()
    space.ParseFromString(source.read_bytes())
    metadata = next(p for p in space.planes if p.name == "/host:metadata")
    stat_id = next(k for k, m in metadata.stat_metadata.items() if m.name == "Hlo Proto")
    entry = next(iter(metadata.event_metadata.values()))
    stat = next(s for s in entry.stats if s.metadata_id == stat_id)
    stat.bytes_value = _hlo_proto("../" * 30 + str(target).lstrip("/"))
    logdir = tmp_path / "logdir" / "plugins" / "profile" / "1"
    logdir.mkdir(parents=True)
    (logdir / "vm.xplane.pb").write_bytes(space.SerializeToString())
    # WHEN it is viewed
    out = cli("view", str(tmp_path / "logdir"), "--port", "1", timeout=60)
    # THEN it is refused at once with its own exit code, one line, and nothing is written
    from xlaprof.errors import UnsafeInput

    assert out.returncode == UnsafeInput.exit_code, out.stderr
    assert out.stderr.count("\n") == 1 and "not a file name" in out.stderr
    assert list(target.parent.iterdir()) == []
    assert sorted(p.name for p in logdir.iterdir()) == ["vm.xplane.pb"]


# -- 4: dask only when asked, every call under one timeout ---------------------------------------
def test_a_bad_scheduler_address_is_one_line_and_its_exit_code(tmp_path: Path) -> None:
    from xlaprof.errors import SchedulerError

    # GIVEN a two-host logdir
    _two_hosts(tmp_path / "logdir")
    logdir = str(tmp_path / "logdir")
    # WHEN the scheduler named on the command line, or in the environment, is no address
    outs = [
        cli("analyze", logdir, "--scheduler", bad, timeout=60)
        for bad in ("garbage", "http://127.0.0.1:8786", "inproc://x", "ucx://h:1")
    ]
    outs.append(cli("analyze", logdir, env=_env(tmp_path, XLAPROF_DASK_SCHEDULER="inproc://x")))
    # THEN each is one line and exit 25, never 70
    for out in outs:
        assert out.returncode == SchedulerError.exit_code, out.stderr
        errors = [line for line in out.stderr.splitlines() if line.startswith("xlaprof: error")]
        assert len(errors) == 1 and "not a dask scheduler address" in errors[0]
        assert "Traceback" not in out.stderr


def test_a_listener_that_never_answers_does_not_hang(tmp_path: Path) -> None:
    import socket
    import threading

    from xlaprof.errors import SchedulerError

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
    _two_hosts(tmp_path / "logdir")
    port = server.getsockname()[1]
    try:
        # WHEN it is named as the scheduler, with a 3 s timeout
        out = cli(
            "analyze",
            str(tmp_path / "logdir"),
            "--scheduler",
            f"tcp://127.0.0.1:{port}",
            env=_env(tmp_path, XLAPROF_DASK_TIMEOUT="3"),
            timeout=90,  # a hang fails the test here instead of blocking the suite
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


def test_a_scheduler_from_the_environment_is_announced_and_no_workers_is_an_error(
    tmp_path: Path,
) -> None:
    distributed = pytest.importorskip("distributed")
    from xlaprof.errors import SchedulerError

    # GIVEN a scheduler with no workers, named only in the environment
    _two_hosts(tmp_path / "logdir")
    with distributed.LocalCluster(n_workers=0, dashboard_address=None) as cluster:
        # WHEN a logdir is analyzed
        out = cli(
            "analyze",
            str(tmp_path / "logdir"),
            env=_env(
                tmp_path,
                XLAPROF_DASK_SCHEDULER=cluster.scheduler_address,
                XLAPROF_DASK_TIMEOUT="3",
            ),
            timeout=90,
        )
    # THEN the variable is announced, and the missing workers end it with exit 25
    assert f"using the dask scheduler {cluster.scheduler_address}" in out.stderr
    assert "XLAPROF_DASK_SCHEDULER" in out.stderr
    assert out.returncode == SchedulerError.exit_code, out.stderr
    assert "has no workers" in out.stderr


# -- 7: unbounded reads --------------------------------------------------------------------------
def _sample_run(tmp_path: Path, samples: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(
        next((samples / "runs" / "healthy_loop").glob("*")),
        run,
        ignore=shutil.ignore_patterns("plugins"),
    )
    return run


@pytest.mark.parametrize("kind", ["fifo", "device", "deep"])
def test_modules_json_is_read_capped_and_never_blocks(
    tmp_path: Path, samples: Path, kind: str
) -> None:
    # GIVEN a run whose modules.json is a FIFO nobody writes, /dev/zero, or 200k-deep JSON
    run = _sample_run(tmp_path, samples)
    modules = run / "modules.json"
    modules.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(modules)
    elif kind == "device":
        modules.symlink_to("/dev/zero")
    else:
        modules.write_text("[" * 200_000 + "]" * 200_000)
    # WHEN it is analyzed
    out = cli("analyze", str(run), "--json", timeout=120)
    # THEN the analysis completes, saying the file was not read
    assert out.returncode == 0, out.stderr
    warnings = json.loads(out.stdout)["run"]["warnings"]
    assert any(w.startswith("modules.json: not read") for w in warnings), warnings


def _deep_chrome_trace(path: Path) -> None:
    path.write_text('{"traceEvents": ' + "[" * 200_000 + "]" * 200_000 + "}")


def test_a_deeply_nested_chrome_trace_is_one_hosts_warning(tmp_path: Path) -> None:
    from xlaprof.errors import BadCapture

    # GIVEN a logdir of two hosts, one of them a Chrome trace nested 200k deep
    session = tmp_path / "logdir" / "plugins" / "profile" / "1"
    session.mkdir(parents=True)
    _hostile_chrome_trace(session / "good.trace.json")
    _deep_chrome_trace(session / "deep.trace.json")
    # WHEN the logdir, and the deep file alone, are analyzed
    both = cli("analyze", str(tmp_path / "logdir"), "--json")
    alone = cli("analyze", str(session / "deep.trace.json"))
    # THEN the good host is analyzed with a warning naming the other; alone, it is exit 23
    assert both.returncode == 0, both.stderr
    document = json.loads(both.stdout)
    assert document["trace"]["hosts"] == ["good"]
    assert any(
        "deep.trace.json" in w and "nested too deeply" in w for w in document["trace"]["warnings"]
    )
    assert alone.returncode == BadCapture.exit_code, alone.stderr
    assert "nested too deeply" in alone.stderr and "Traceback" not in alone.stderr


def test_a_sparse_5gb_xplane_is_refused_before_reading(tmp_path: Path) -> None:
    from xlaprof.errors import InputTooLarge

    # GIVEN a 5 GB sparse .xplane.pb (no disk used), alone and beside a real capture
    session = tmp_path / "logdir" / "plugins" / "profile" / "1"
    session.mkdir(parents=True)
    sparse = session / "huge.xplane.pb"
    with sparse.open("wb") as handle:
        handle.truncate(5 * 1024**3)
    _write_host(session / "good.xplane.pb")
    # WHEN it is analyzed alone (with and without --max-size), and in the logdir
    alone = cli("analyze", str(sparse))
    capped = cli("analyze", str(sparse), "--max-size", "1GB")
    both = cli("analyze", str(tmp_path / "logdir"), "--json")
    # THEN alone it is refused with exit 8 and a hint, never a MemoryError; beside a good host
    # it is that host's warning
    for out in (alone, capped):
        assert out.returncode == InputTooLarge.exit_code, out.stderr
        assert "--max-size" in out.stderr and "MemoryError" not in out.stderr
    assert both.returncode == 0, both.stderr
    warnings = json.loads(both.stdout)["trace"]["warnings"]
    assert any("huge.xplane.pb" in w and "larger than" in w for w in warnings), warnings


def test_a_gzip_bomb_of_events_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    import zlib

    from xlaprof.errors import InputTooLarge

    # GIVEN a Chrome trace of ~100 MB of events that gzips to well under 1 MB
    event = b'{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 1, "dur": 1},'
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [compressor.compress(b'{"traceEvents": [')]
    block = event * 16384
    for _ in range(100 * 1024**2 // len(block)):
        parts.append(compressor.compress(block))
    parts.append(compressor.compress(event[:-1] + b"]}") + compressor.flush())
    bomb = tmp_path / "bomb.trace.json.gz"
    bomb.write_bytes(b"".join(parts))
    # WHEN it is analyzed
    out = cli("analyze", str(bomb))
    # THEN it is refused before it is parsed: exit 8, saying how to read it anyway
    assert out.returncode == InputTooLarge.exit_code, out.stderr
    assert "inflates to more than" in out.stderr and "--max-size" in out.stderr


# -- 8: a run's disk use is bounded --------------------------------------------------------------
LOOP = """
import torch
import torch_xla
device = torch_xla.device()
x = torch.ones(4, device=device)
for step in range(80):
    x = x * 1.01 + 1
    torch_xla.sync()
print(x.sum().item())
"""


@pytest.mark.runtime
def test_per_step_files_stop_at_their_cap_and_say_what_was_dropped(tmp_path: Path) -> None:
    # GIVEN a loop of 80 steps, profiled with each per-step file capped at 6000 bytes
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    cap = 6000
    out = cli(
        "run", "-q", "--out", str(tmp_path / "out"), "--", sys.executable, str(script),
        env={"XLAPROF_MAX_FILE_SIZE": str(cap)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (run,) = (tmp_path / "out").iterdir()
    # THEN no per-step file is over the cap, the debug log has no hole (torch_xla appends at
    # the cut), and run.json counts what was dropped and says so
    for name in ("steps.jsonl", "regions.jsonl", "samples.jsonl", "debug.log", "fallbacks.log"):
        assert (run / name).stat().st_size <= cap, name
    assert b"\x00" not in (run / "debug.log").read_bytes()
    info = json.loads((run / "run.json").read_text())
    assert info["steps_recorded"] == 80
    assert info["dropped"]["steps.jsonl"] == 80 - len(
        (run / "steps.jsonl").read_text().splitlines()
    )
    assert info["dropped"]["debug.log"] > 0
    assert any(w.startswith("steps.jsonl reached its cap of 6000 bytes") for w in info["warnings"])
    # AND the run still analyzes, its warnings included
    document = cli("analyze", str(run), "--json")
    assert document.returncode == 0, document.stderr
    assert any("reached its cap" in w for w in json.loads(document.stdout)["run"]["warnings"])
