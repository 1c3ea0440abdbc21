"""``xlaprof mcp`` as an agent's client sees it: the real command in a subprocess, driven over
stdio by the MCP Python SDK's own client.

The answers are held to ``xlaprof analyze --json`` run on the same input (with the same source
root, since the server quotes source lines only under its roots): the same findings, counts,
run record, per-step rows, devices and ops. One server serves every call of a module (starting
one costs about two seconds).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import EXAMPLES, REPO, SAMPLES, TPU, TRACES, cli

anyio = pytest.importorskip("anyio")
mcp = pytest.importorskip("mcp")

CAPTURE = TRACES / TPU  # TPU v6e x4, JAX on libtpu (conftest.shared_traces checks it is there)
RUN = SAMPLES / "runs" / "host_sync_item"
READ_TOOLS = {
    "list_inputs",
    "analyze",
    "steps",
    "device_ops",
    "compare_runs",
    "check_budgets",
    "explain_finding",
}


def converse(roots: list[Path], calls: list[tuple[str, dict[str, Any]]], *options: str):
    """Start ``xlaprof mcp --root ROOT... OPTIONS``, list its tools, make ``calls`` in order;
    the tools and each call's result."""
    from mcp import Client, StdioServerParameters

    arguments = ["-m", "xlaprof", "mcp", *(f"--root={r}" for r in roots), *options]
    params = StdioServerParameters(
        command=sys.executable,
        args=arguments,
        env={**os.environ, "PJRT_DEVICE": "CPU"},
        cwd=str(REPO),
    )

    async def session() -> tuple[list[Any], list[Any]]:
        async with Client(params, read_timeout_seconds=300) as client:
            tools = (await client.list_tools()).tools
            return tools, [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(session)


def answer(result: Any) -> dict[str, Any]:
    """A successful call's structured content, checked against its text twin."""
    assert not result.is_error, result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def cli_json(path: Path, source_root: Path) -> dict[str, Any]:
    done = cli("analyze", str(path), "--json", "--source-root", str(source_root))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root whose capture folder holds a link to a capture outside every root."""
    root = tmp_path_factory.mktemp("root")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    capture = next(RUN.glob("*/plugins/profile/*/vm.xplane.pb"))
    shutil.copy(capture, elsewhere / "peer.xplane.pb")
    (root / "logdir").mkdir()
    shutil.copy(capture, root / "logdir" / "host.xplane.pb")
    (root / "logdir" / "peer.xplane.pb").symlink_to(elsewhere / "peer.xplane.pb")
    return root


@pytest.fixture(scope="module")
def served(outside: Path, shared_traces: Path) -> dict[str, Any]:
    """One server over the samples, the real captures and ``outside``: every call's result."""
    roots = [SAMPLES, outside, shared_traces]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_inputs", {"limit": 500}),
        ("analyze", {"path": str(RUN)}),
        ("steps", {"path": str(RUN), "limit": 5}),
        ("steps", {"path": str(RUN), "limit": 5, "offset": 5}),
        ("steps", {"path": str(RUN), "limit": 5, "offset": 10}),
        ("analyze", {"path": "/etc/passwd"}),
        ("analyze", {"path": str(outside / "logdir")}),
        ("analyze", {"path": "runs/no_such_run"}),
        ("run_script", {"script": str(EXAMPLES / "host_sync_item.py")}),
        ("explain_finding", {"kind": "host_sync"}),
        ("analyze", {"path": str(CAPTURE)}),
        ("device_ops", {"path": str(CAPTURE), "limit": 100}),
        ("device_ops", {"path": str(CAPTURE), "limit": 100, "offset": 100}),
        ("steps", {"path": str(CAPTURE), "table": "device_steps", "device": "TPU:2"}),
    ]
    tools, results = converse(roots, calls)
    served: dict[str, Any] = {"tools": tools}
    for (name, args), result in zip(calls, results, strict=True):
        key = f"{name} {args.get('path') or args.get('script') or args.get('kind') or ''}"
        served.setdefault(key.strip(), []).append(result)
    return served


def test_the_tools_are_listed_with_documented_typed_schemas(served: dict[str, Any]) -> None:
    # GIVEN a server started without --allow-run WHEN its tools are listed
    tools = {tool.name: tool for tool in served["tools"]}
    # THEN the read-only tools are there, and no tool that runs code
    assert set(tools) == READ_TOOLS
    for tool in tools.values():
        # AND each says what it does, takes typed arguments and declares what it returns
        assert tool.description and tool.output_schema["type"] == "object"
        assert tool.annotations.read_only_hint is True
        for name, schema in tool.input_schema["properties"].items():
            assert "description" in schema, f"{tool.name}({name}) is undocumented"
    assert tools["analyze"].input_schema["required"] == ["path"]
    assert {"summary", "findings", "trace"} <= set(tools["analyze"].output_schema["properties"])


def test_a_sample_run_gives_the_numbers_of_analyze_json(served: dict[str, Any]) -> None:
    # GIVEN the CLI's document for the bundled host_sync_item run
    document = cli_json(RUN, SAMPLES)
    # WHEN the server analyzes it
    got = answer(served[f"analyze {RUN}"][0])
    # THEN the counts, the findings (evidence, line, fix) and the run record are the CLI's
    assert got["schema"] == document["schema"] == "xlaprof.analysis/1"
    assert got["summary"] == document["summary"]
    assert got["findings"] == document["findings"]
    assert [f["kind"] for f in got["findings"]] == ["host_sync"]
    assert got["findings"][0]["location"]["line"] == 22
    assert got["run"] == document["run"]
    assert got["trace"]["devices"] == document["trace"]["devices"]
    assert got["trace"]["top_ops"] == document["trace"]["top_ops"][:10]
    # AND the step timeline, read in three pages, is the document's row for row
    pages = [answer(r) for r in served[f"steps {RUN}"]]
    assert [p["next_offset"] for p in pages] == [5, 10, None]
    assert [row for page in pages for row in page["rows"]] == document["timeline"]
    assert got["tables"]["timeline"] == pages[0]["total"] == len(document["timeline"]) == 12
    # AND the steady state is the console's median row: the steady step (after 2 of warm-up,
    # compiling nothing) of median wall time, with its own parts and bound
    steady = pages[0]["steady"]
    rows = [r for r in document["timeline"] if r["steady"]]
    assert (steady["steps"], steady["warmup_steps"]) == (len(rows), 2) and len(rows) >= 8
    median = sorted(rows, key=lambda r: r["wall_s"])[(len(rows) - 1) // 2]
    assert steady["median_step"] == median["step"] and steady["bound"] == median["bound"]
    assert steady["median_s"]["wall_s"] == pytest.approx(median["wall_s"])
    assert pages[0]["verdict"].startswith("From the trace: the largest part of")


def test_a_real_tpu_capture_gives_the_numbers_of_analyze_json(served: dict[str, Any]) -> None:
    # GIVEN the CLI's document for a real TPU v6e capture (4 chips)
    document = cli_json(CAPTURE, TRACES)
    trace = document["trace"]
    # WHEN the server analyzes it
    got = answer(served[f"analyze {CAPTURE}"][0])
    # THEN findings, counts, devices, top ops and table sizes are the CLI's
    assert got["findings"] == document["findings"]
    assert got["summary"] == document["summary"]
    assert got["trace"]["devices"] == trace["devices"]
    assert [d["device"] for d in got["trace"]["devices"]] == ["TPU:0", "TPU:1", "TPU:2", "TPU:3"]
    assert got["trace"]["top_ops"] == trace["top_ops"][:10]
    assert got["tables"]["ops"] == trace["device_ops_total"]
    assert got["tables"]["device_steps"] == trace["device_steps_total"]
    # AND the first page of ops is the document's device_ops; the next goes past its cut
    first, second = (answer(r) for r in served[f"device_ops {CAPTURE}"])
    assert first["rows"] == trace["device_ops"]
    assert first["total"] == second["total"] == trace["device_ops_total"]
    assert len(first["rows"]) + len(second["rows"]) == min(200, trace["device_ops_total"])
    # AND one device's steps are the document's rows of that device
    steps = answer(served[f"steps {CAPTURE}"][0])
    mine = [r for r in trace["device_steps"] if r["device"] == "TPU:2"]
    assert steps["total"] == len(mine) and steps["rows"] == mine[:20]


def test_paths_outside_the_roots_are_refused_with_the_cli_error(
    served: dict[str, Any], outside: Path
) -> None:
    # GIVEN a file outside every root, and a folder inside one holding a link out
    for key, needle in (
        ("analyze /etc/passwd", "outside the folders this server may read"),
        (f"analyze {outside / 'logdir'}", "holds a link that leads out"),
    ):
        # WHEN each is analyzed
        result = served[key][0]
        # THEN it is a tool error with the CLI's message, exit code and class
        assert result.is_error
        error = result.structured_content["error"]
        assert needle in error["message"]
        assert (error["exit_code"], error["class"]) == (24, "OutsideRoots")
        assert result.content[0].text.startswith("xlaprof: error: ")
    # AND a missing path inside the roots is "not found", exit 3, as `xlaprof analyze` says
    error = served["analyze runs/no_such_run"][0].structured_content["error"]
    assert (error["exit_code"], error["class"]) == (3, "InputNotFound")


def test_the_run_tool_is_absent_without_its_flag(served: dict[str, Any]) -> None:
    # GIVEN a server started without --allow-run WHEN run_script is called anyway
    result = served[f"run_script {EXAMPLES / 'host_sync_item.py'}"][0]
    # THEN the call fails: there is no such tool
    assert result.is_error
    assert "run_script" in result.content[0].text


def test_list_inputs_shows_the_samples_and_captures(served: dict[str, Any]) -> None:
    # WHEN what is under the roots is listed
    listing = answer(served["list_inputs"][0])
    kinds = {Path(e["path"]).name: e["kind"] for e in listing["entries"]}
    # THEN the sample runs, the sample logs and the real captures are there with their kinds
    assert kinds["host_sync_item"] == "run"
    assert kinds["cpu_fallback.log"] == "log"
    assert kinds[CAPTURE.name] == "capture"


def test_explain_finding_reads_the_analyzers_page_and_constants(served: dict[str, Any]) -> None:
    from xlaprof.analyzers import host_sync

    # WHEN host_sync is explained
    got = answer(served["explain_finding host_sync"][0])
    # THEN its page is the docs page, and its thresholds are the module's, as they are now
    assert got["page"] == (REPO / "docs" / "analyzers" / "host_sync.md").read_text()
    assert got["constants"]["HOST_SYNC_MIN_COUNT"] == host_sync.HOST_SYNC_MIN_COUNT


@pytest.mark.runtime
def test_with_allow_run_a_script_runs_capped_and_is_analyzed(tmp_path: Path) -> None:
    # GIVEN a root holding the host_sync example and a script that never ends
    for name in ("host_sync_item.py", "_common.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    (tmp_path / "forever.py").write_text("import time\ntime.sleep(600)\n")
    # WHEN a server allowed to run code, at most 3 steps, runs both
    tools, (ran, hung) = converse(
        [tmp_path],
        [
            ("run_script", {"script": "host_sync_item.py", "max_steps": 50, "out": "run"}),
            ("run_script", {"script": "forever.py", "timeout_s": 1}),
        ],
        "--allow-run",
        "--max-run-steps=3",
    )
    # THEN the tools that run code are offered
    assert {t.name for t in tools} == READ_TOOLS | {"run_script", "bench_fix"}
    # AND the example ran 3 steps, not 50, and its analysis finds the .item() line
    got = answer(ran)
    assert got["exit_code"] == 0, got["output_tail"]
    assert got["analysis"]["run"]["steps_recorded"] == 3
    assert Path(got["out"]) == tmp_path / "run"
    # AND the script that never ends was stopped at its timeout
    stopped = answer(hung)
    assert stopped["timed_out"] and stopped["exit_code"] is None


# -- a root someone else filled (issue 38) ----------------------------------------------------
# A folder of process runs in which one process's run.json is a link to a file outside every
# root (its fields must not reach the answer), and a FIFO named as a budget file (reading it
# must not hold the server: the next call is answered).
MARKER = "outside-the-roots-7f3a"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("root")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (real,) = RUN.glob("*/run.json")
    # a run.json outside the roots, whose fields would show in a listing if it were read
    secret = json.loads(real.read_text())
    secret.update(status=MARKER, command=[MARKER], cwd=f"/{MARKER}")
    (elsewhere / "run.json").write_text(json.dumps(secret))
    runs = root / "runs"
    shutil.copytree(real.parent, runs / "p1")
    (runs / "p0").mkdir()
    (runs / "p0" / "run.json").symlink_to(elsewhere / "run.json")
    os.mkfifo(root / "budget.toml")
    return {"root": root, "runs": runs, "p1": runs / "p1"}


def _error(result: Any) -> dict[str, Any]:
    assert result.is_error, result.content[0].text
    return result.structured_content["error"]


def test_listings_and_tools_read_nothing_through_a_link_out(hostile: dict[str, Path]) -> None:
    # GIVEN the root; WHEN an agent lists it, analyzes the folder of runs, checks budgets with
    # the FIFO as budget file, and lists again
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_inputs", {}),
        ("analyze", {"path": str(hostile["runs"])}),
        ("check_budgets", {"paths": [str(hostile["p1"])], "budget_file": "budget.toml"}),
        ("list_inputs", {"under": "runs/p1"}),
    ]
    _tools, results = converse([hostile["root"]], calls)
    listing, analysis, budgets, again = results
    # THEN the listing names the folder's runs but holds nothing of the file outside: the
    # process whose run.json is a link is unreadable, not read through the link
    text = listing.content[0].text
    assert not listing.is_error and MARKER not in text
    (entry,) = [e for e in listing.structured_content["entries"] if e["path"].endswith("runs")]
    assert entry["processes"] == ["p0", "p1"]
    assert "unreadable" in entry["status"]
    # AND the folder cannot be analyzed: it holds a link out of the roots
    refused = _error(analysis)
    assert refused["class"] == "OutsideRoots" and MARKER not in analysis.content[0].text
    # AND the FIFO is refused at once as no regular file, without holding the server
    fifo = _error(budgets)
    assert fifo["class"] == "BudgetError" and "not a regular file" in fifo["message"]
    # AND the next call is answered
    assert not again.is_error and again.structured_content["total"] == 1
