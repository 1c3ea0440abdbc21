"""`xlaprof analyze` as a user runs it: real subprocesses, real sample captures."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from builders import STRETCH, marker_walls, one_metrics_report, pod_logdir
from helpers import (
    GPU_JAX,
    GPU_SAMPLES,
    GPU_TORCH,
    HTA,
    MI210,
    REPO,
    SHARED_CAPTURES,
    TPU,
    analyze_json,
    check_contract,
    cli,
    gpu_sample,
    jax_cpu_sample,
    line_of,
    sample_capture,
    sample_run,
    shared_trace,
)

from xlaprof.analyzers import analyzer_of
from xlaprof.findings import Kind

SAMPLE_EXPECTATIONS = {
    "healthy_loop": [],
    "recompile_varying_batch": ["recompilation"],
    "host_sync_item": ["host_sync"],
    "cpu_fallback": ["aten_fallback"],
}


@pytest.mark.parametrize(("name", "kinds"), SAMPLE_EXPECTATIONS.items())
def test_json_on_each_sample(samples: Path, name: str, kinds: list[str]) -> None:
    result = cli("analyze", "--json", str(samples / f"{name}.log"))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)  # exactly one JSON document on stdout
    check_contract(document)
    assert [f["kind"] for f in document["findings"]] == kinds
    assert len(document["reports"]) == 1
    assert document["summary"]["compiles"] >= 2
    assert document["summary"]["executions"] >= 12
    assert len(document["debug_events"]) >= 14


def test_terminal_output_names_the_user_line(samples: Path) -> None:
    result = cli("analyze", str(samples / "host_sync_item.log"))
    assert result.returncode == 0
    line = line_of("host_sync_item", "history.append(loss.item())")
    assert f"examples/host_sync_item.py:{line}" in result.stdout
    assert "[host_sync]" in result.stdout and "fix:" in result.stdout


def test_summary_excludes_local_scalar_dense_from_fallbacks(samples: Path) -> None:
    document = json.loads(cli("analyze", "--json", str(samples / "cpu_fallback.log")).stdout)
    assert document["summary"]["aten_fallbacks"] == {"aten::median": 12}
    counters = document["reports"][0]["counters"]
    assert counters["aten::_local_scalar_dense"] >= 1


def test_output_file_is_written_whole_and_not_overwritten(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "analysis.json"
    assert cli("analyze", str(samples / "healthy_loop.log"), "-o", str(out)).returncode == 0
    check_contract(json.loads(out.read_text()))
    again = cli("analyze", str(samples / "healthy_loop.log"), "-o", str(out))
    assert again.returncode == 11 and "--force" in again.stderr
    assert (
        cli("analyze", str(samples / "healthy_loop.log"), "-o", str(out), "--force").returncode == 0
    )


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, int, str]]:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(os.urandom(4096))
    prose = tmp_path / "notes.txt"
    prose.write_text("epoch 1 loss 0.3\nepoch 2 loss 0.2\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    huge = tmp_path / "huge.log"
    with huge.open("wb") as handle:  # sparse: 1 GB of size, no disk used
        handle.truncate(1024**3)
    return {
        "missing": (tmp_path / "nope.log", 3, "no such file"),
        "directory": (folder, 9, "is a directory"),
        "unreadable": (blocker / "child.log", 4, "cannot be read"),
        "empty": (empty, 5, "empty"),
        "binary": (junk, 6, "binary"),
        "no report": (prose, 7, "no metrics report"),
        "1 GB": (huge, 8, "limit"),
    }


def test_bad_input_gives_one_line_and_a_distinct_exit_code(tmp_path: Path) -> None:
    codes = set()
    out = tmp_path / "out.json"
    for label, (path, code, words) in _bad_inputs(tmp_path).items():
        result = cli("analyze", "--json", "-o", str(out), str(path))
        assert result.returncode == code, (label, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (label, result.stderr)
        assert str(path) in lines[0] and words in lines[0], (label, lines[0])
        assert "Traceback" not in result.stderr
        assert result.stdout == ""
        assert not out.exists()  # nothing half-written
        codes.add(code)
    assert len(codes) == 7


def test_large_file_is_read_with_max_size(tmp_path: Path, samples: Path) -> None:
    text = (samples / "healthy_loop.log").read_text()
    path = tmp_path / "job.log"
    path.write_text(text)
    limited = cli("analyze", "--max-size", "1KB", str(path))
    assert limited.returncode == 8
    assert cli("analyze", "--max-size", "2MB", str(path)).returncode == 0


def test_analyze_works_where_torch_xla_cannot_be_imported(tmp_path: Path, samples: Path) -> None:
    # GIVEN an environment where importing torch or torch_xla raises
    for module in ("torch_xla", "torch"):
        package = tmp_path / "blocked" / module
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(f"raise ImportError('{module} blocked for test')\n")
    env = {"PYTHONPATH": f"{tmp_path / 'blocked'}{os.pathsep}{REPO}"}
    probe = subprocess.run(
        [sys.executable, "-c", "import torch_xla"], capture_output=True, text=True, env=env
    )
    assert "blocked for test" in probe.stderr
    # WHEN analyze runs on a capture THEN it works and finds the problem
    result = cli("analyze", "--json", str(samples / "cpu_fallback.log"), env=env)
    assert result.returncode == 0, result.stderr
    assert [f["kind"] for f in json.loads(result.stdout)["findings"]] == ["aten_fallback"]


@pytest.mark.parametrize(("name", "kinds"), SAMPLE_EXPECTATIONS.items())
def test_committed_sample_runs(samples: Path, name: str, kinds: list[str]) -> None:
    # Run directories written by `xlaprof run` on the CPU runtime (sample_traces/README.md).
    # the repository as the source root: the samples were recorded in another checkout
    result = cli("analyze", "--json", str(samples / "runs" / name), "--source-root", str(REPO))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    check_contract(document)
    assert [f["kind"] for f in document["findings"]] == kinds
    assert document["run"]["steps_recorded"] == 12 and document["run"]["status"] == "ok"
    assert len(document["run"]["traces"]) == 1  # --trace-steps 4:6
    for finding in document["findings"]:
        assert finding["location"]["file"].endswith(f"examples/{name}.py")


def test_a_single_capture_file_is_an_input(tmp_path: Path) -> None:
    capture = shared_trace(TPU)
    # analyze: one capture file is an input like a run directory
    result = cli("analyze", str(capture), "--json")
    assert result.returncode == 0, result.stderr
    trace = json.loads(result.stdout)["trace"]
    assert sorted(d["device"] for d in trace["devices"]) == ["TPU:0", "TPU:1", "TPU:2", "TPU:3"]
    assert {d["type"] for d in trace["devices"]} == {"TPU v6 Lite"}
    assert trace["top_ops"][0]["name"] == "copy-done.4" and trace["top_ops"][0]["devices"] == 4
    assert len(trace["device_steps"]) == sum(d["steps"] for d in trace["devices"])
    # a folder of Chrome traces (no plugins/profile, not a run) is a trace input too
    folder = tmp_path / "kineto"
    folder.mkdir()
    (folder / MI210).symlink_to(shared_trace(MI210))
    result = cli("analyze", str(folder), "--json")
    assert result.returncode == 0, result.stderr
    assert [d["device"] for d in json.loads(result.stdout)["trace"]["devices"]] == ["GPU:1"]


@pytest.mark.parametrize("name", [GPU_JAX, GPU_TORCH])
def test_analyze_says_host_bound_not_tracing(gpu_linked: dict[str, Path], name: str) -> None:
    result = cli("analyze", str(gpu_linked[name]), env={"COLUMNS": "120"})
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "Host vs device, per step" in text
    assert re.search(r"the largest part of \d+ of \d+ steps is host", text)
    assert "tracing-bound" not in text and "the host traces" not in text
    assert "op time by category" in text
    assert "No Steps line" not in text  # steps came from the capture's own markers
    document = json.loads(cli("analyze", str(gpu_linked[name]), "--json").stdout)
    tracing = document["trace"]["tracing"]
    # bound by the host, but for a first step spent compiling (JAX's warm-up in the window)
    assert {row["bound"] for row in tracing[1:]} == {"host"}
    assert tracing[0]["bound"] in {"host", "compile"}
    assert all(row["tracing_s"] is None and row["lazy_tensor"] is False for row in tracing)
    timeline = document["timeline"]
    assert all(row["python_tracing_s"] is None and row["graph_build_s"] is None for row in timeline)
    assert all(row["device_busy_s"] > 0 for row in timeline)
    # nothing was written next to the capture
    assert sorted(p.name for p in GPU_SAMPLES.iterdir()) == [
        "README.md",
        "capture_gpu.json",
        "capture_gpu.py",
        GPU_JAX,
        GPU_TORCH,
    ]


def test_analyze_leaves_the_autotuning_out_of_the_top_ops(gpu_linked: dict[str, Path]) -> None:
    result = cli("analyze", str(gpu_linked[GPU_JAX]), env={"COLUMNS": "120"})
    top = result.stdout.split("Top device ops")[1].split("\n\n")[0]
    assert "RedzoneAllocator" not in top and "MemcpyOther" not in top
    assert "Not in the top ops: 2,113 GPU kernels and copies" in result.stdout
    assert "in step 0" in result.stdout
    # the host-vs-device table shows 8 of the 12 annotated steps, and says so
    assert "(4 more steps in --json)" in result.stdout


def test_cli_names_a_broken_host_and_analyzes_the_rest(tmp_path: Path) -> None:
    markers = pod_logdir(tmp_path, 3, {"host-0": {"stretch": STRETCH}})
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
    for step, wall in marker_walls(markers["host-0"]).items():
        assert rows[step]["slowest_host"] == "host-0"
        assert rows[step]["slowest_ms"] == pytest.approx(wall, abs=1e-6)
    html_file = tmp_path / "report.html"
    out = cli("report", str(tmp_path), "-o", str(html_file), env={"XLAPROF_LAZY_BYTES": "0"})
    assert out.returncode == 0, out.stderr
    assert 'id="fig-host-steps"' in html_file.read_text()


def _peak_rss_of(*args: str) -> int:
    """Peak RSS (bytes) of ``python -m xlaprof ARGS`` run in a fresh process."""
    code = (
        "import resource, runpy, sys\n"
        f"sys.argv = ['xlaprof', *{list(args)!r}]\n"
        "try:\n    runpy.run_module('xlaprof', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=600
    )
    return int(result.stderr.strip().splitlines()[-1]) * 1024


def test_memory_follows_the_kept_reports_not_the_file_size(tmp_path: Path) -> None:
    # GIVEN a 1-report log and a ~24 MB log of the same report repeated
    small, large = tmp_path / "small.log", tmp_path / "large.log"
    report = one_metrics_report()
    small.write_text(report)
    with large.open("w") as handle:
        for index in range(24 * 1024**2 // len(report)):
            handle.write(f"[MetricsData; step={index}]\n{report}")
    # WHEN both are analyzed (--json, the larger output)
    base = _peak_rss_of("analyze", "--json", "-o", str(tmp_path / "a.json"), str(small))
    peak = _peak_rss_of("analyze", "--json", "-o", str(tmp_path / "b.json"), str(large))
    # THEN the large one costs far less than the file (the old parser took ~20x the file)
    assert peak - base < large.stat().st_size, (base, peak)


def test_a_file_over_max_size_is_refused_with_advice(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    with path.open("wb") as handle:
        handle.truncate(300 * 1024**2)  # sparse: no disk used
    result = cli("analyze", str(path))
    assert result.returncode == 8
    assert "pass --max-size 301MB" in result.stderr and "Traceback" not in result.stderr


def _unrolled_loop_evidence(run: Path, *options: str) -> dict[str, Any]:
    document = analyze_json(run, *options)
    return next(f for f in document["findings"] if f["kind"] == "unrolled_loop")["evidence"]


@pytest.mark.runtime
def test_analyze_reads_sources_under_the_recorded_cwd_or_source_root(
    example_runs: dict[str, Path], tmp_path: Path
) -> None:
    # GIVEN a run of the unrolled-loop example made here (a run recorded elsewhere would name a
    # cwd that is not on this machine), without its live module tree (modules.json): its
    # finding then names the loop only by reading the user's source
    run = tmp_path / "unrolled_layers"
    shutil.copytree(next(example_runs["unrolled_layers"].glob("*/run.json")).parent, run)
    (run / "modules.json").unlink()
    info = json.loads((run / "run.json").read_text())
    examples = Path(info["cwd"]) / "examples"
    assert (examples / "unrolled_layers.py").is_file(), examples
    default = _unrolled_loop_evidence(run)
    assert "loop" in default  # read: the recorded cwd exists here
    # WHEN the recorded cwd is elsewhere, nothing under the old one is read
    info["cwd"] = str(tmp_path)
    (run / "run.json").write_text(json.dumps(info))
    elsewhere = _unrolled_loop_evidence(run)
    assert "loop" not in elsewhere
    # AND --source-root gives it back
    given = _unrolled_loop_evidence(run, "--source-root", str(examples))
    assert given.get("loop") == default["loop"]


# Every real capture at hand: ../shared/traces, the H100 captures and the JAX-on-CPU folder.
REAL = [
    *((shared_trace, name) for name in SHARED_CAPTURES),
    *((gpu_sample, name) for name in (GPU_JAX, GPU_TORCH)),
    (lambda _: jax_cpu_sample().parent, "jax_cpu"),
]


@pytest.mark.parametrize(("where", "name"), REAL, ids=[name for _, name in REAL])
def test_every_real_capture_analyzes_with_bottlenecks(where: Any, name: str) -> None:
    done = cli("analyze", "--json", str(where(name)))
    assert done.returncode == 0, done.stderr
    trace = json.loads(done.stdout)["trace"]
    # the CUPTI range profiler's capture has no timed device event (its ranges' times are the
    # window split evenly: tests/parse/test_chrome_trace.py), so nothing to split by cause
    assert (trace["bottlenecks_total"] > 0) == (name != HTA)


def test_tracing_bound_evidence() -> None:
    # GIVEN the recorded run of the tiny-ops example (a verdict on durations: judged on a run
    # whose times are fixed, never on one this machine makes during the tests)
    document = analyze_json(sample_run("tracing_bound_tiny_ops"))
    (finding,) = document["findings"]
    # THEN it is tracing-bound at the line where the host's CPU goes
    assert finding["kind"] == "tracing_bound"
    assert finding["location"]["file"].endswith("examples/tracing_bound_tiny_ops.py")
    assert finding["location"]["line"] == line_of("tracing_bound_tiny_ops", "state = state * 0.999")
    evidence = finding["evidence"]
    assert evidence["host_to_device_ratio"] > 1
    assert evidence["ops_traced_per_step"] == 150 * 16 * 3  # the loop: 2 muls and an add
    assert evidence["cxx11_abi"] is True and "C++11-ABI build" in finding["suggestion"]
    line = line_of("tracing_bound_tiny_ops", "state = state * 0.999")
    assert any(
        key.endswith(f"tracing_bound_tiny_ops.py:{line}")
        for key in evidence["top_host_lines_cpu_share"]
    )
    # placed at the line making the graph's ops (HLO metadata), with advice for what the script
    # does not use yet; torch_xla.compile is not offered as a way to skip tracing (it does not)
    assert evidence["graph_ops_by_user_line"]
    assert "MpDeviceLoader" in finding["suggestion"] and "torch.compile(" in finding["suggestion"]
    assert "without tracing" not in finding["suggestion"]


def test_the_console_and_json_open_with_the_story(tmp_path: Path) -> None:
    # GIVEN a run analyzed on the command line, as text and as --json
    run = sample_run("tracing_bound_tiny_ops")
    text = cli("analyze", str(run), env={"COLUMNS": "200"})
    document = json.loads(cli("analyze", "--json", str(run)).stdout)
    assert text.returncode == 0, text.stderr
    # WHEN the first lines are read THEN they tell the story before any table
    lines = text.stdout.splitlines()
    story_at = next(i for i, line in enumerate(lines) if "steady. The median steady step" in line)
    table_at = next(i for i, line in enumerate(lines) if line.startswith("steps "))
    worth_at = next(i for i, line in enumerate(lines) if line.startswith("Worth most:"))
    assert story_at < worth_at < table_at
    assert "[tracing_bound]" in lines[worth_at]
    # AND the JSON story is the same numbers
    story = document["story"]
    assert story["bound"] == "tracing" and story["worth_most"]["kind"] == "tracing_bound"
    # AND says why that kind answers the bound: its registry entry's story sentence
    assert story["worth_most_answer"] == analyzer_of(Kind.TRACING_BOUND).story.sentence
    rows = [r for r in document["timeline"] if r["steady"]]
    assert story["steady_steps"] == len(rows)
    assert {r["step"] for r in rows} >= {story["median_step"]}


# The kinds read from a profiler capture's per-step bottlenecks (docs/analyzers/README.md).
CAPTURE_KINDS = {"input_bound", "collective_bound", "async_wait", "host_bound"}


def test_each_kind_says_whether_it_was_measured(samples: Path) -> None:
    # GIVEN a metrics report alone (no capture, no graphs) and a run directory of the same
    # script that holds a trace window and its compiled graphs
    report = samples / "host_sync_item.log"
    run = sample_run("host_sync_item")
    assert sample_capture("host_sync_item").is_file()
    assert any(run.glob("*/graphs/index.jsonl"))
    for path in (report, run):
        # WHEN each is analyzed with --json
        document = analyze_json(path)
        status = {entry["kind"]: entry for entry in document["analyzers"]}
        # THEN every kind is listed once, "found" exactly where it has a finding
        assert len(document["analyzers"]) == len(status) == len(Kind)
        found = {f["kind"] for f in document["findings"]}
        assert {k for k, e in status.items() if e["status"] == "found"} == found
        assert "host_sync" in found
        # AND a kind not measured says why; one measured says nothing
        for entry in document["analyzers"]:
            assert (entry["why"] is not None) == (entry["status"] == "not_measured"), entry
    # AND the report alone has no capture and no graphs: those kinds are not measured, and why
    alone = {e["kind"]: e for e in analyze_json(report)["analyzers"]}
    for kind in CAPTURE_KINDS:
        assert alone[kind]["status"] == "not_measured" and "capture" in alone[kind]["why"]
    assert alone["unrolled_loop"]["status"] == "not_measured"
    assert "graphs" in alone["unrolled_loop"]["why"]
    # AND the run measured them: its capture and graphs were read
    measured = {e["kind"]: e for e in analyze_json(run)["analyzers"]}
    for kind in {*CAPTURE_KINDS, "unrolled_loop"}:
        assert measured[kind]["status"] != "not_measured", measured[kind]
    # AND the console names the kinds not measured on one line, and every kind with -v
    text = cli("analyze", str(report), env={"COLUMNS": "400"}).stdout.splitlines()
    (line,) = [line for line in text if line.startswith("Not measured: ")]
    assert all(kind in line for kind in {*CAPTURE_KINDS, "unrolled_loop"})
    assert "host_sync" not in line
    verbose = cli("analyze", "-v", str(run), env={"COLUMNS": "400"}).stdout
    rows = [line.split() for line in verbose.splitlines()]
    listed = {row[0]: " ".join(row[1:3]) for row in rows if row and row[0] in status}
    assert listed == {
        kind: {"found": "found", "nothing_found": "nothing found"}.get(
            entry["status"], "not measured"
        )
        for kind, entry in measured.items()
    }
