"""The MCP tools' own state (``xlaprof.mcp.tools``): an analysis is kept while its input is
unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers import SAMPLES

RUN = SAMPLES / "runs" / "host_sync_item"


def test_an_analysis_is_reused_while_its_input_is_unchanged(tmp_path: Path) -> None:
    from xlaprof.mcp.roots import Roots
    from xlaprof.mcp.tools import Tools

    # GIVEN a copy of a sample run under a root, analyzed once
    shutil.copytree(RUN, tmp_path / "run")
    tools = Tools(Roots([tmp_path]))
    first = tools.analysis("run")
    # WHEN it is asked for again (paging through a table) THEN the same analysis answers
    assert tools.analysis("run") is first
    # AND once a file of the run changes (a run still being written), it is analyzed again
    with next((tmp_path / "run").glob("*/steps.jsonl")).open("a") as rows:
        rows.write("\n")
    assert tools.analysis("run") is not first


def test_host_tables_and_torch_compiles_are_step_tables(tmp_path: Path) -> None:
    from xlaprof.mcp.roots import Roots
    from xlaprof.mcp.tools import Tools

    # GIVEN a CPU-only capture with the TORCH_TRACE log of its run (sample_traces/host_capture)
    shutil.copytree(SAMPLES / "host_capture", tmp_path / "capture")
    tools = Tools(Roots([tmp_path]))
    # THEN an agent pages the same host and compile tables the CLI prints
    host = tools.steps("capture", table="host_activity")
    assert host.total == 12 and {"read_ms", "compile_ms"} <= set(host.rows[0])
    compiles = tools.steps("capture", table="torch_compiles")
    assert [r["compile_id"] for r in compiles.rows] == ["0/0", "0/1"]
    assert compiles.rows[1]["step"] == 8
    overview = tools.analyze("capture")
    assert {"input_bound", "compile_in_step", "recompilation"} <= {
        f.kind for f in overview.findings
    }
