"""The run directory (``xlaprof.rundir.reader``), loaded without torch_xla: tolerance, versions,
step attribution, and a damaged or hostile run (rows of any JSON type, a graph named outside
the run, a gzip bomb, a FIFO where a file should be) read with warnings, never a crash."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from pathlib import Path

import hypothesis
import pytest
from builders import copy_run
from helpers import SAMPLES, analyze_json, cli
from hypothesis import strategies as st

from xlaprof.errors import RunDirError
from xlaprof.rundir.reader import load_run, load_runs

COMPILE_BLOCK = """Compilation Analysis: {eq}
Compilation Analysis: Compilation Cause
Compilation Analysis:   user torch_xla.sync
Compilation Analysis: Graph Info:{sp}
Compilation Analysis:   Graph Hash: {hash}
Compilation Analysis:   Number of Graph Inputs: 3
Compilation Analysis:   Number of Graph Outputs: 2
Compilation Analysis: Python Frame Triggered Execution:{sp}
Compilation Analysis:   sync (/venv/site-packages/torch_xla/torch_xla.py:87)
Compilation Analysis:   main (/home/me/train.py:40)
Compilation Analysis: {dash}
Compilation Analysis: {eq}
"""


def _block(graph: str) -> str:
    # Real logs end these two header lines with a space.
    return COMPILE_BLOCK.format(eq="=" * 80, dash="-" * 80, hash=graph, sp=" ")


def _write_run(directory: Path, info: dict, steps: list[dict], debug: str = "") -> Path:
    directory.mkdir(parents=True)
    (directory / "run.json").write_text(json.dumps(info))
    (directory / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    if debug:
        (directory / "debug.log").write_text(debug)
    return directory


def test_minimal_run_json_loads_with_defaults(tmp_path: Path) -> None:
    # A run.json holding only the schema (as the earliest writers did) still loads.
    run = load_run(_write_run(tmp_path / "r", {"schema": 1}, [{"step": 0, "wall_s": 0.5}]))
    assert run.info.status == "running" and run.info.env == {}
    steps = run.steps()
    assert list(steps["step"]) == [0] and steps["compiles"][0] == 0
    assert run.events().empty and run.metrics_reports() == []


def test_unknown_keys_are_ignored(tmp_path: Path) -> None:
    info = {"schema": 1, "status": "ok", "some_future_field": [1, 2]}
    step = {"step": 0, "wall_s": 0.1, "a_future_metric": 3}
    run = load_run(_write_run(tmp_path / "r", info, [step]))
    assert run.info.status == "ok" and len(run.step_rows()) == 1


def test_newer_schema_is_refused_clearly(tmp_path: Path) -> None:
    _write_run(tmp_path / "r", {"schema": 99}, [])
    with pytest.raises(RunDirError, match="newer xlaprof"):
        load_run(tmp_path / "r")
    result = cli("analyze", str(tmp_path / "r"))
    assert result.returncode == 9 and "newer xlaprof" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_cut_last_line_is_dropped(tmp_path: Path) -> None:
    directory = _write_run(tmp_path / "r", {"schema": 1}, [{"step": 0}, {"step": 1}])
    with (directory / "steps.jsonl").open("a") as handle:
        handle.write('{"step": 2, "wall_')  # the writer was killed mid-line
    assert [r.step for r in load_run(directory).step_rows()] == [0, 1]


def test_log_offsets_tie_events_to_steps(tmp_path: Path) -> None:
    first, second, third = _block("aaa"), _block("bbb"), _block("ccc")
    offsets = [len(first), len(first) + len(second)]
    steps = [
        {"step": 0, "compiles": 1, "debug_offset": offsets[0]},
        {"step": 1, "compiles": 1, "debug_offset": offsets[1]},
        {"step": 2, "compiles": 0, "debug_offset": offsets[1]},
    ]
    run = load_run(_write_run(tmp_path / "r", {"schema": 1}, steps, first + second + third))
    compiles = run.compiles()
    # the third block was written after the last finished step: it belongs to the tail (3)
    assert list(compiles["step"]) == [0, 1, 3]
    assert list(compiles["graph_hash"]) == ["aaa", "bbb", "ccc"]
    assert set(compiles["location"]) == {"/home/me/train.py:40"}


def test_several_processes_are_each_analyzed(tmp_path: Path) -> None:
    for rank in (1, 0):
        steps = [{"step": i, "compiles": 1 if i < 2 else 0} for i in range(4)]
        _write_run(tmp_path / "job" / f"host-{rank}", {"schema": 1, "rank": rank}, steps)
    runs = load_runs(tmp_path / "job")
    assert [r.info.rank for r in runs] == [0, 1]
    result = cli("analyze", "--json", str(tmp_path / "job"))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert len(document["processes"]) == 2 and document["summary"]["steps"] == 8
    # AND each kind's status over the run: found in any process, else measured in any
    per_process = [{e["kind"]: e["status"] for e in p["analyzers"]} for p in document["processes"]]
    merged = {e["kind"]: e["status"] for e in document["analyzers"]}
    assert set(merged) == set(per_process[0]) == set(per_process[1])
    for kind, status in merged.items():
        seen = {statuses[kind] for statuses in per_process}
        first = next(s for s in ("found", "nothing_found", "not_measured") if s in seen)
        assert status == first, kind


def test_not_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match=r"no run\.json"):
        load_run(tmp_path)


def test_mixing_runs_and_files_is_refused(tmp_path: Path) -> None:
    _write_run(tmp_path / "r", {"schema": 1}, [])
    result = cli("analyze", str(tmp_path / "r"), str(SAMPLES / "healthy_loop.log"))
    assert result.returncode == 7 and "not both" in result.stderr


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
    out = cli("analyze", str(run), "--json")
    # THEN the analysis completes, saying the file was not read
    assert out.returncode == 0, out.stderr
    warnings = json.loads(out.stdout)["run"]["warnings"]
    assert any(w.startswith("modules.json: not read") for w in warnings), warnings


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


_STEP_KEYS = ["step", "wall_s", "compiles", "compile_s", "aten", "debug_offset", "ops", "start"]


@hypothesis.settings(max_examples=150, deadline=None)
@hypothesis.given(
    rows=st.lists(
        st.one_of(st.fixed_dictionaries({}, optional={k: _json for k in _STEP_KEYS}), _json),
        max_size=5,
    ),
    regions=st.lists(_json, max_size=3),
    samples=st.lists(_json, max_size=3),
)
def test_run_rows_of_any_json_type_load(tmp_path_factory, rows, regions, samples) -> None:
    from xlaprof.inputs.paths import DEFAULT_MAX_INPUT_BYTES, load_parts
    from xlaprof.pipeline import analyze_parts

    root = tmp_path_factory.mktemp("hyp")
    (root / "run.json").write_text(json.dumps({"schema": 1, "status": "ok"}))
    for name, values in (("steps", rows), ("regions", regions), ("samples", samples)):
        (root / f"{name}.jsonl").write_text("".join(json.dumps(v) + "\n" for v in values))
    parts = load_parts([root], DEFAULT_MAX_INPUT_BYTES, 2)
    analyze_parts(parts)
    for step in parts[0].data.steps:
        assert isinstance(step.step, int) and not isinstance(step.step, bool)
        assert step.wall_s is None or isinstance(step.wall_s, float)


def test_damaged_run_files_load_with_warnings(tmp_path: Path) -> None:
    # GIVEN a real run with each kind of damage named in the issue
    run = copy_run(tmp_path)
    steps = (run / "steps.jsonl").read_text().split("\n")
    rows = [json.loads(line) for line in steps if line]
    rows[3]["step"] = None
    rows[4]["wall_s"] = "abc"
    lines = [json.dumps(r) for r in rows]
    lines.insert(2, "[1,2,3]")
    (run / "steps.jsonl").write_text("\n".join(lines) + "\n")
    (run / "regions.jsonl").write_text(
        '{"step": 0, "name": "fwd", "calls": "many", "seconds": 1}\n'
    )
    (run / "samples.jsonl").write_text('[["step", 0]]\n{"step": 1, "samples": [1, 2]}\n')
    graphs = sorted((run / "graphs").glob("*.hlo.txt.gz"))
    graphs[0].write_bytes(graphs[0].read_bytes()[:100])  # truncated
    graphs[1].unlink()  # missing
    # WHEN it is analyzed
    document = analyze_json(run)
    # THEN the readable rows are used and every damage is named in a warning
    warnings = " | ".join(document["run"]["warnings"])
    assert document["summary"]["steps"] == len(rows) - 1  # the step-less row is dropped
    for needle in ("list, not an object", "step = null", "wall_s", "calls"):
        assert needle in warnings, (needle, warnings)
    assert "samples.jsonl" in warnings and "truncated gzip" in warnings
    assert "No such file" in warnings or "no such file" in warnings


def test_graph_index_names_outside_the_run_are_not_read(tmp_path: Path) -> None:
    # GIVEN a readable HLO file outside the run, named by ../ and by absolute path
    run = copy_run(tmp_path)
    outside = tmp_path / "secret.hlo.txt.gz"
    shutil.copy(sorted((run / "graphs").glob("*.gz"))[0], outside)
    index = run / "graphs" / "index.jsonl"
    entries = [json.loads(line) for line in index.read_text().split("\n") if line]
    entries[0]["file"] = "../../secret.hlo.txt.gz"
    entries[1]["file"] = str(outside)
    index.write_text("".join(json.dumps(e) + "\n" for e in entries))
    from xlaprof.rundir.reader import load_run

    loaded = load_run(run)
    graphs = loaded.graphs()
    # THEN neither is read, and the warnings say why
    assert graphs[0].hlo is None and graphs[1].hlo is None
    assert any("outside" in w for w in loaded.load_warnings)
    assert any("absolute path" in w for w in loaded.load_warnings)
    assert graphs[2].hlo is not None  # the others still are


def test_a_gzip_bomb_in_graphs_is_capped_while_inflating(tmp_path: Path) -> None:
    import tracemalloc

    from xlaprof.rundir.reader import MAX_GRAPH_BYTES, load_run

    run = copy_run(tmp_path)
    bomb = sorted((run / "graphs").glob("*.gz"))[0]
    bomb.write_bytes(gzip.compress(b"\0" * (MAX_GRAPH_BYTES * 4), 9))
    tracemalloc.start()
    loaded = load_run(run)
    loaded.graphs()
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert any("inflates to more than" in w for w in loaded.load_warnings)
    assert peak < MAX_GRAPH_BYTES * 2.5  # never the whole bomb (4x the cap)


def test_debug_log_offsets_count_newlines_only(tmp_path: Path) -> None:
    # GIVEN a debug.log whose lines hold a form feed and U+2028, one compilation per step
    block = (
        "Compilation Analysis: ================================================================\n"
        "Compilation Analysis: Compilation Cause\n"
        "Compilation Analysis:   most likely user code trying to access tensor value{}\n"
        "Compilation Analysis: Graph Info: \n"
        "Compilation Analysis:   Graph Hash: h{}\n"
        "Compilation Analysis: --------------------------------------------------------------\n"
        "Compilation Analysis: ================================================================\n"
    )
    texts = [block.format(" \x0c here", 0), block.format(" \u2028", 1), block.format("", 2)]
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"schema": 1, "status": "ok"}))
    data = b""
    rows = []
    for step, text in enumerate(texts):
        data += text.encode()
        rows.append({"step": step, "debug_offset": len(data), "compiles": 1})
    (run / "debug.log").write_bytes(data)
    (run / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    from xlaprof.rundir.reader import load_run

    events = load_run(run).debug_log().events
    assert [e.graph_hash for e in events] == ["h0", "h1", "h2"]
    assert [e.step for e in events] == [0, 1, 2]


def test_a_steps_file_cut_short_of_run_json_is_named_damaged(tmp_path: Path) -> None:
    # GIVEN a finished real run whose steps.jsonl was cut mid-row after a few steps
    run = copy_run(tmp_path)
    recorded = json.loads((run / "run.json").read_text())["steps_recorded"]
    text = (run / "steps.jsonl").read_text()
    rows = [line for line in text.split("\n") if line]
    assert recorded == len(rows) >= 4
    kept = rows[:3]
    (run / "steps.jsonl").write_text("\n".join(kept) + "\n" + rows[3][: len(rows[3]) // 2])
    # WHEN it is analyzed
    document = analyze_json(run)
    # THEN the run is named damaged with what was kept, and no finding claims more steps
    # with reads than the run has
    notes = " ".join(document["run"]["warnings"])
    assert f"steps.jsonl: damaged: 3 of the {recorded} steps" in notes
    for finding in document["findings"]:
        shares = re.findall(r"in (\d+) of (\d+) steps", finding["title"])
        assert all(int(a) <= int(b) for a, b in shares), finding["title"]


def test_steps_recorded_follows_steps_jsonl_when_run_json_is_stale(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    info = json.loads((run / "run.json").read_text())
    info.update(status="running", steps_recorded=0)  # as a SIGKILL left it
    (run / "run.json").write_text(json.dumps(info))
    lines = [x for x in (run / "steps.jsonl").read_text().split("\n") if x]
    document = analyze_json(run)
    assert document["run"]["steps_recorded"] == len(lines)


def test_sample_rows_of_one_step_add_up(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"schema": 1, "steps_recorded": 2}))
    (run / "samples.jsonl").write_text(
        '{"step": 1, "samples": {"a.py:3": 0.25}}\n'
        '{"step": 1, "samples": {"a.py:3": 0.5, "a.py:4": 0.1}}\n'
    )
    assert load_run(run).host_sample_map() == {1: {"a.py:3": 0.75, "a.py:4": 0.1}}


def _index_entries(run: Path) -> list[dict]:
    index = run / "graphs" / "index.jsonl"
    return [json.loads(line) for line in index.read_text().split("\n") if line]


def test_one_graph_listed_200_times_is_parsed_once(tmp_path: Path, monkeypatch) -> None:
    import xlaprof.parse.hlo as hlo_module

    # GIVEN a run whose graphs/index.jsonl lists one compressed graph 200 times
    run = copy_run(tmp_path)
    first = next(e for e in _index_entries(run) if e.get("file"))
    repeated = [{**first, "order": order} for order in range(200)]
    (run / "graphs" / "index.jsonl").write_text("".join(json.dumps(e) + "\n" for e in repeated))
    parsed: list[int] = []
    real_parse = hlo_module.parse_hlo

    def counting_parse(text: str):  # the real parser, counted
        parsed.append(len(text))
        return real_parse(text)

    monkeypatch.setattr(hlo_module, "parse_hlo", counting_parse)
    # WHEN its graphs are read
    loaded = load_run(run)
    graphs = loaded.graphs()
    # THEN the file is inflated and parsed once; the other 199 entries are damage, said once
    assert len(parsed) == 1
    assert len(graphs) == 200 and sum(g.hlo is not None for g in graphs) == 1
    assert all("read once" in (g.skipped or "") for g in graphs[1:])
    damaged = [w for w in loaded.load_warnings if "index.jsonl: damaged" in w]
    assert len(damaged) == 1 and "199 entries" in damaged[0]


def test_a_runs_graphs_are_capped_in_total_inflated_bytes(tmp_path: Path, monkeypatch) -> None:
    import xlaprof.rundir.reader as reader

    # GIVEN a run with several distinct graph files, and a total cap that the first one spends
    run = copy_run(tmp_path)
    files = [e["file"] for e in _index_entries(run) if e.get("file")]
    assert len(files) >= 3
    first_size = len(gzip.decompress((run / "graphs" / files[0]).read_bytes()))
    monkeypatch.setattr(reader, "MAX_RUN_GRAPH_BYTES", first_size)
    # WHEN its graphs are read
    loaded = load_run(run)
    graphs = loaded.graphs()
    # THEN the first is read and no other: a warning counts the files left unread
    kept = [g for g in graphs if g.hlo is not None]
    assert len(kept) == 1
    # (the first graph's HloProto, read after its text, finds the cap spent too; the other
    # graphs' protos are read only with their text)
    first_proto = 1 if _index_entries(run)[0].get("proto") else 0
    unread = len(files) - 1 + first_proto
    assert any(f"{unread} graph files not read" in w for w in loaded.load_warnings)


def test_a_run_given_alone_reads_no_torch_trace_beside_it(tmp_path: Path) -> None:
    # GIVEN a run directory whose parent holds a torch_trace/ log of the run's process (what
    # `xlaprof run` writes for a launch), as a sent folder or an MCP root one level down has it
    run = copy_run(tmp_path / "launch")
    info = json.loads((run / "run.json").read_text())
    pid = info.get("pid") or 4242
    info["pid"] = pid
    (run / "run.json").write_text(json.dumps(info))
    logs = tmp_path / "launch" / "torch_trace"
    logs.mkdir()
    log = logs / "dedicated_log_torch_trace_x.log"
    log.write_text(f"V1127 14:07:16.065000 {pid} torch/_dynamo/utils.py:1952] {{}}\n")
    # WHEN the run is loaded on its own, and through the launch's folder
    alone = load_run(run)
    launch = load_run(tmp_path / "launch")
    # THEN only the load that was given the launch's folder reads the log beside the run
    assert alone.torch_trace_files() == []
    assert launch.torch_trace_files() == [log]
