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
