"""A finding's location is one fact, whichever form shows it (issue 47): the console text, the
``--json`` document, the HTML report and the MCP server's ``analyze`` tool name the same
``file:line`` for every finding and say the same thing of what that line is.

Judged on real-code runs recorded once (sample_traces/realcode_runs/, read with this checkout as
the source root, as tests/analyzers/test_*_realcode.py read them). The lines each must name come
from the set-ups' own ``# expect: KIND`` markers, and the function a read sits in from the
set-up's source parsed with ``ast``, never from xlaprof's output. Before, the text and the JSON
could name different lines for one finding and what the line was lived in the evidence, which
the console cut and MCP left to the reader; two reads in two functions were told apart by line
alone.
"""

from __future__ import annotations

import ast
import html
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import EXAMPLES, REPO, SAMPLES

from xlaprof.model.request import AnalysisRequest
from xlaprof.pipeline import analyze
from xlaprof.report import RenderOptions, renderer_for

sys.path.insert(0, str(EXAMPLES / "corpus"))
import judge

pytest.importorskip("google.protobuf")

RUNS = SAMPLES / "realcode_runs"
REALCODE = EXAMPLES / "realcode"
# Runs of several kinds of finding and of placing rule: reads in two functions, a padding
# collator, a library's growing accumulator, a device-side transform, a short last batch,
# an unrolled gradient-accumulation loop and an RL episode's reads in a library.
NAMES = [
    "mp_eval_reads",
    "wlm_item_reads",
    "text_cls_dynamic_padding",
    "hf_trainer_eval_accumulate",
    "timm_random_erasing",
    "mp_mnist_short_batch",
    "nanogpt_grad_accum",
    "reinforce_episode",
]
_HEADER = re.compile(r"^\d+\. (?:INFO|WARNING|ERROR) \[(\w+)\] ")


def _render(result: Any, name: str) -> str:
    out = io.StringIO()
    renderer_for(result, name).write(result, out, RenderOptions(width=1000))
    return out.getvalue()


def _console_places(text: str) -> list[tuple[str, str | None]]:
    """Each numbered finding of the console text: its kind and its ``at`` line (None: none)."""
    places: list[tuple[str, str | None]] = []
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            places.append((header.group(1), None))
        elif line.startswith("   at ") and places and places[-1][1] is None:
            places[-1] = (places[-1][0], line.removeprefix("   at "))
    return places


def _html_places(page: str) -> list[str | None]:
    """Each finding box of the HTML report: its ``at`` text (None: none)."""
    boxes = re.findall(r'<div class="finding [a-z]+">(.*?)<pre class="fix">', page, re.S)
    places = []
    for box in boxes:
        where = re.search(r'<div class="where">at (.*?)</div>', box, re.S)
        places.append(None if where is None else html.unescape(where.group(1)))
    return places


def _function_at(script: Path, line: int) -> str | None:
    """The innermost function of ``script`` whose body holds ``line`` (Python's own parser)."""
    found = None
    for node in ast.walk(ast.parse(script.read_text())):
        holds = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (
            node.lineno <= line <= (node.end_lineno or node.lineno)
        )
        if holds and (found is None or node.lineno > found.lineno):
            found = node
    return None if found is None else found.name


@pytest.mark.parametrize("name", NAMES)
def test_every_form_names_the_same_line_and_says_what_it_is(name: str) -> None:
    from xlaprof.mcp.roots import Roots
    from xlaprof.mcp.tools import Tools

    # GIVEN a recorded real-code run, analyzed once with this checkout as the source root
    result = analyze(AnalysisRequest((RUNS / name,), source_root=REPO))
    document = json.loads(_render(result, "json"))
    findings = document["findings"]
    assert findings, name
    # WHEN the console, the HTML report and the MCP analyze tool show the same analysis
    text = _render(result, "console")
    console = _console_places(text)
    page = _html_places(_render(result, "html"))
    served = Tools(Roots([REPO])).analyze(
        str((RUNS / name).relative_to(REPO)), max_findings=len(findings)
    )
    assert len(console) == len(page) == len(served.findings) == len(findings)
    script = REALCODE / f"{name}.py"
    for index, finding in enumerate(findings):
        where = finding["location"]
        mcp = served.findings[index].location
        if where is None:
            # THEN a finding with no line has none in every form
            assert console[index] == (finding["kind"], None) and page[index] is None
            assert mcp is None
            continue
        # THEN every form names the JSON's file:line and says the same of it
        said = f"{where['file']}:{where['line']}"
        assert where["what"], f"{name} {finding['kind']} at {said}: says nothing of the line"
        shown = f"{said} ({where['what']})"
        assert console[index] == (finding["kind"], shown)
        assert page[index] == shown
        assert mcp is not None
        assert (mcp.file, mcp.line, mcp.what) == (where["file"], where["line"], where["what"])
        # AND the line is one the set-up marks for this kind, where it marks any
        marked = judge.marked_lines(name, finding["kind"], REALCODE)
        if marked:
            assert Path(where["file"]).name == script.name
            assert where["line"] in marked, f"{name} {finding['kind']} at {said}"
        # AND a read names the function it is in
        if finding["kind"] == "host_sync" and Path(where["file"]).name == script.name:
            function = _function_at(script, where["line"])
            assert function is not None
            assert where["what"].endswith(f", in {function}()"), where["what"]
    # AND the headline's "Worth most" line names its finding's line as the finding does
    shown_lines = {
        f"{f['location']['file']}:{f['location']['line']} ({f['location']['what']})"
        for f in findings
        if f["location"] is not None
    }
    for line in text.splitlines():
        if line.startswith("Worth most: ") and " at " in line:
            assert any(line.endswith(f" at {shown}") for shown in shown_lines), line


@pytest.mark.parametrize(
    ("name", "functions"),
    [("mp_eval_reads", ("train_one_epoch", "evaluate")), ("wlm_item_reads", ("train", "evaluate"))],
)
def test_a_read_in_another_function_is_reported_at_its_line_in_that_function(
    name: str, functions: tuple[str, str]
) -> None:
    # GIVEN a training loop's loss.item() and a separate evaluate()'s criterion(...).item()
    script = REALCODE / f"{name}.py"
    lines = judge.marked_lines(name, "host_sync", REALCODE)
    assert {_function_at(script, n) for n in lines} == set(functions)
    # THEN each line has its own finding, which names the function holding it
    result = analyze(AnalysisRequest((RUNS / name,), source_root=REPO))
    reads = {
        f.location.line: f.location.what
        for part in result.parts
        for f in part.findings
        if f.kind.value == "host_sync" and f.location is not None
    }
    assert set(reads) == set(lines)
    for line in lines:
        assert reads[line].endswith(f", in {_function_at(script, line)}()"), reads[line]
