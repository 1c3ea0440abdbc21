"""Whole outputs of every renderer on the sample inputs, compared with files kept in
``tests/report/golden/`` and reviewed as diffs.

For each sample input: the console report (unwrapped), the ``--json`` document, and the HTML
report's structure (its tags, classes and headings, the story and the findings' text; plotly's
inlined library and figure data left out). Paths that depend on where the repository or the
sample's recording sat are both replaced by ``<repo>``.

After a change that means to change an output, or after the sample runs are regenerated
(``make samples``), rewrite the files and review the diff:

    UPDATE_GOLDEN=1 PJRT_DEVICE=CPU .venv/bin/python -m pytest -q tests/report/test_golden.py
    git diff tests/report/golden/

(``make golden`` runs the first line.)
"""

from __future__ import annotations

import io
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers import REPO, SAMPLES, sample_run

import xlaprof
from xlaprof.model.request import AnalysisRequest
from xlaprof.model.result import AnalysisResult
from xlaprof.pipeline import analyze
from xlaprof.report import RenderOptions, renderer_for

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
# Wide enough that no line wraps: a wrap falls where the text's paths put it, and the paths
# differ from clone to clone (the widths a terminal has are test_console's)
WIDTH = 1000


def _inputs() -> dict[str, Path]:
    """The sample inputs whose outputs are kept: three runs, a log and a capture alone."""
    return {
        "recompile_varying_batch": sample_run("recompile_varying_batch"),
        "host_sync_item": sample_run("host_sync_item"),
        "tracing_bound_tiny_ops": sample_run("tracing_bound_tiny_ops"),
        "healthy_loop_log": SAMPLES / "healthy_loop.log",
        "host_capture": SAMPLES / "host_capture" / "torch_profiler_cpu.pt.trace.json.gz",
    }


NAMES = sorted(_inputs())


def _recorded_roots(result: AnalysisResult) -> list[str]:
    """Where the input was recorded (a run's working directory, which holds its examples)."""
    roots = []
    for part in result.parts:
        if part.part.run_path is None:
            continue
        cwd = xlaprof.load_run(part.part.run_path).info.cwd
        if cwd:
            roots.append(str(cwd).rstrip("/"))
    return roots


def _normal(text: str, result: AnalysisResult) -> str:
    """``text`` with the repository's and the recording's folders named, not spelled: both
    as ``<repo>``, since the recording's folder is this checkout's where the samples were
    regenerated and another clone's everywhere else."""
    roots = {*_recorded_roots(result), str(REPO)}
    for root in sorted(roots, key=len, reverse=True):
        text = text.replace(root, "<repo>")
    # a log's recording folder (a log names no folder of its own, only its frames' files)
    text = re.sub(r"(?<![\w>])/[\w./-]*/examples/", "<repo>/examples/", text)
    # a recording's venv (torch's own files quoted as an op's source), wherever it was
    return re.sub(r"[^\s\"']*/\.venv/lib/python[0-9.]+/site-packages", "<site-packages>", text)


def _render(result: AnalysisResult, name: str) -> str:
    out = io.StringIO()
    renderer_for(result, name).write(result, out, RenderOptions(width=WIDTH))
    return out.getvalue()


class _Structure(HTMLParser):
    """An HTML page as one line per element (indented by depth, with its class) and per
    piece of text outside scripts and styles; a figure's div by its id alone."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.depth = 0
        self.skip = 0

    VOID = frozenset({"meta", "br", "hr", "img", "input", "link"})

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.skip:
            self.skip += tag not in self.VOID
            return
        named = dict(attrs)
        label = tag + "".join(f".{c}" for c in (named.get("class") or "").split())
        if named.get("id"):
            label += f"#{named['id']}"
        self.lines.append("  " * self.depth + label)
        if tag in ("script", "style"):
            self.skip = 1
            return
        if tag not in self.VOID:
            self.depth += 1

    def handle_endtag(self, tag: str) -> None:
        if self.skip:
            self.skip -= 1
            return
        if tag not in self.VOID:
            self.depth = max(self.depth - 1, 0)

    def handle_data(self, data: str) -> None:
        if not self.skip and data.strip():
            self.lines.append("  " * self.depth + repr(data.strip()))


def _html_structure(page: str) -> str:
    parser = _Structure()
    parser.feed(page)
    return "\n".join(parser.lines) + "\n"


def _outputs(path: Path) -> dict[str, str]:
    """Each output kept for the input at ``path``, normalised, by its golden file's suffix."""
    # the repository as the source root: the samples' sources are this checkout's examples,
    # wherever the samples were recorded (a run's recorded folder exists only where it was)
    result = analyze(AnalysisRequest((path,), source_root=REPO))
    document = json.loads(_render(result, "json"))
    return {
        "console.txt": _normal(_render(result, "console"), result),
        "json": _normal(json.dumps(document, indent=1, sort_keys=True), result) + "\n",
        "html.txt": _normal(_html_structure(_render(result, "html")), result),
    }


@pytest.mark.parametrize("name", NAMES)
def test_every_renderers_whole_output_is_the_kept_one(name: str) -> None:
    # GIVEN a sample input, WHEN every renderer writes its analysis
    outputs = _outputs(_inputs()[name])
    for suffix, text in outputs.items():
        golden = GOLDEN / f"{name}.{suffix}"
        if UPDATE:
            golden.parent.mkdir(exist_ok=True)
            golden.write_text(text)
            continue
        # THEN each is the output kept for it, line for line
        assert golden.is_file(), f"{golden} missing: run UPDATE_GOLDEN=1 (see this module)"
        expected = golden.read_text().split("\n")
        got = text.split("\n")
        for number, (want, have) in enumerate(zip(expected, got, strict=False), start=1):
            assert have == want, f"{golden.name} line {number}"
        assert len(got) == len(expected), f"{golden.name}: {len(got)} lines, kept {len(expected)}"


def _device_text(result: AnalysisResult) -> str:
    from rich.console import Console

    from xlaprof.report.devices import render_console

    console = Console(file=io.StringIO(), width=WIDTH, color_system=None)
    devices = result.parts[0].devices
    assert devices is not None
    render_console(console, devices)
    text: str = console.file.getvalue()  # type: ignore[attr-defined]
    return text


def test_a_document_of_version_2_shows_its_device_rows_as_the_analysis_does(
    tmp_path: Path,
) -> None:
    from xlaprof.inputs.saved import load_saved

    # GIVEN the device section an earlier xlaprof wrote of a run's trace window (document
    # version 2: its rows as text), in the document of the same run made now
    older = json.loads((Path(__file__).parents[1] / "data" / "saved_v2_devices.json").read_text())
    measured = analyze(AnalysisRequest((sample_run("host_sync_item"),)))
    document = json.loads(_render(measured, "json"))
    assert document["document_version"] > 2
    document["document_version"] = 2
    document["view"]["devices"] = older
    saved = tmp_path / "older.json"
    saved.write_text(json.dumps(document))
    # WHEN it is read back (the schema accepts it) and its device section shown
    shown = _device_text(load_saved(saved, 1 << 30))
    # THEN it reads as the section of the run analyzed now, its rows numbers, line for line
    assert "Top device ops" in shown
    assert shown == _device_text(measured)
