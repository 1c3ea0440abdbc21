"""A saved result (``xlaprof analyze --json``) is an input of every command and of the facade.

Saved from a run, a capture, a log and a pod, each document read back gives the same counts,
findings, story, figures and budgets' verdicts (and ``check``'s exit code) as the input it was
made from, and every output says that it read a saved result, naming the file. A document its
schema refuses is one line and exit code 29, never a traceback, within seconds and bounded
memory (examples written by hand, then Hypothesis mutations of real documents).
"""

from __future__ import annotations

import copy
import json
import os
import random
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from builders import analysis_input
from fuzzing import (
    CALL_LIMIT_S,
    HOSTILE_JSON,
    MEMORY_GROWTH_LIMIT,
    SMALL,
    Hang,
    deep_json,
    mutate_json_value,
    peak_rss,
    time_limit,
)
from helpers import cli, sample_run, without_saved_line
from hypothesis import strategies as st

from xlaprof.errors import SavedDocumentInvalid, XlaprofError
from xlaprof.inputs.saved import load_saved
from xlaprof.model.request import AnalysisRequest

BUDGETS = (
    "--no-config",
    "--max-recompilations",
    "0",
    "--max-host-syncs-per-step",
    "0",
    "--max-fallback-ops",
    "0",
    "--max-graphs",
    "2",
    "--max-compile-seconds",
    "1",
    "--forbid",
    "host_sync",
    "--forbid",
    "recompilation",
)
SAVED_EXIT = SavedDocumentInvalid.exit_code


def _measured(document: dict[str, Any]) -> dict[str, Any]:
    """What a document says was measured (not the notes on what was read)."""
    view = {k: v for k, v in document["view"].items() if k not in ("notes", "read_from")}
    return {**{k: v for k, v in document.items() if k != "view"}, "view": view}


@pytest.mark.parametrize("kind", ["run", "capture", "log", "pod"])
def test_a_saved_result_reads_back_the_same_in_every_command(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import xlaprof
    from xlaprof.mcp.roots import Roots
    from xlaprof.mcp.tools import Settings, Tools
    from xlaprof.model.request import PodSettings
    from xlaprof.pipeline import analyze, compare

    # GIVEN an input saved with `xlaprof analyze --json`
    original, env = analysis_input(kind, tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    pod = PodSettings.of(os.environ)  # what a command reads of the environment
    done = cli("analyze", "--json", str(original), env=env)
    assert done.returncode == 0, done.stderr
    saved = tmp_path / "saved" / f"saved-{kind}.json"
    saved.parent.mkdir()
    saved.write_text(done.stdout)
    before = json.loads(done.stdout)

    # WHEN `analyze --json` reads the saved document
    again = cli("analyze", "--json", str(saved), env=env)
    # THEN the same numbers, findings, story and figures come back, and it says what it read
    assert again.returncode == 0, again.stderr
    assert f"read a saved result: {saved}" in again.stderr
    after = json.loads(again.stdout)
    assert after["view"]["read_from"] == str(saved)
    assert _measured(after) == _measured(before)

    # AND `check` gives the same verdicts and exit code as for the original
    checked = [cli("check", *BUDGETS, "--json", str(p), env=env) for p in (original, saved)]
    assert checked[0].returncode == checked[1].returncode, checked[1].stderr
    assert checked[0].returncode in (0, 1)
    verdicts = [
        [(b["budget"], b["status"], b["value"]) for b in json.loads(c.stdout)["runs"][0]["budgets"]]
        for c in checked
    ]
    assert verdicts[0] == verdicts[1]
    assert json.loads(checked[1].stdout)["runs"][0]["path"].startswith(str(saved))

    # AND `diff` of the saved document with its input finds nothing changed
    comparison = compare(AnalysisRequest.of(saved, pod=pod), AnalysisRequest.of(original, pod=pod))
    assert comparison.gone == comparison.came == []
    for row in comparison.table.to_dict("records"):
        assert row["before"] == row["after"] or (row["before"] != row["before"]), row

    # AND the facade and the MCP server read it as the same result
    result = analyze(AnalysisRequest.of(saved, pod=pod)).parts[0]
    fresh = analyze(AnalysisRequest.of(original, pod=pod)).parts[0]
    assert result.read_from == str(saved)
    assert [f.to_json() for f in result.findings] == [f.to_json() for f in fresh.findings]
    with pytest.warns(UserWarning, match="read a saved result"):
        notebook = xlaprof.Analysis(saved)
    assert len(notebook.findings()) == len(fresh.findings)
    assert len(notebook.timeline()) == len(fresh.timeline_frame())
    tools = Tools(Roots([tmp_path]), Settings(pod=pod))
    listed = tools.list_inputs(str(saved.parent)).entries
    assert [(e.path, e.kind) for e in listed] == [(str(saved), "saved_result")]
    overview = tools.analyze(str(saved))
    assert overview.summary.model_dump() == before["summary"]
    assert any(f"read a saved result: {saved}" in note for note in overview.notes)
    # AND MCP's steady state of the steps is the one the analysis made, read back
    steady = tools.steps(str(saved)).steady
    assert (steady is None) == (fresh.steady is None)
    if steady is not None and fresh.steady is not None:
        assert (steady.steps, steady.median_step) == (fresh.steady.steps, fresh.steady.median_step)
        assert steady.median_s == fresh.steady.median_s

    # AND the console and HTML reports name the saved file first, then what it was made from
    console = _render("console", result)
    assert console.split("\n")[0].startswith(f"xlaprof analyze {saved}  (a saved result")
    assert without_saved_line(console) == _render("console", fresh)
    html = _render("html", result)
    assert "a saved result: nothing was measured again" in html


def _render(name: str, part: Any) -> str:
    """``part`` as renderer ``name`` writes it, 400 wide (no long path wrapped)."""
    import io

    from xlaprof.model.result import AnalysisResult
    from xlaprof.report import RenderOptions, renderer_for

    result = AnalysisResult([part])
    out = io.StringIO()
    renderer_for(result, name).write(result, out, RenderOptions(width=400))
    return out.getvalue()


# -- what the schema refuses ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real saved document (the sample run's), to damage."""
    done = cli("analyze", "--json", str(sample_run("recompile_varying_batch")))
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_a_document_of_version_3_is_given_the_steady_step_of_its_timeline(
    saved_doc: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN the sample run's document as version 3 wrote it: no view.steady
    older = copy.deepcopy(saved_doc)
    older["document_version"] = 3
    held = older["view"].pop("steady")
    assert held is not None and held["steps"] > 0
    path = tmp_path / "v3.json"
    path.write_text(json.dumps(older))
    # WHEN it is read back
    (part,) = load_saved(path, 2**30).parts
    # THEN its steady step is made of its timeline's rows (all kept here): the steady rows
    # counted, the median one's wall time, the same step as the version-4 document holds
    assert part.steady is not None
    rows = [r for r in saved_doc["timeline"] if r["steady"] and r["step"] >= 2]
    assert part.steady.steps == len(rows) == held["steps"]
    assert part.steady.median_step == held["median_step"] == saved_doc["story"]["median_step"]
    walls = sorted(r["wall_s"] for r in rows)
    assert part.steady.median_s["wall_s"] == walls[(len(walls) - 1) // 2]
    assert part.steady.to_json() == held


def _table(document: dict[str, Any]) -> dict[str, Any]:
    table: dict[str, Any] = document["view"]["tables"]["timeline"]
    return table


def _unknown_dtype(d: dict[str, Any]) -> None:
    _table(d)["dtypes"][0] = "V17179869184"  # numpy: a 16 GiB void per cell


def _text_in_number_column(d: dict[str, Any]) -> None:
    table = _table(d)
    column = table["dtypes"].index("float64")
    table["rows"][0][column] = "<script>alert(1)</script>"


def _parts_past_the_step(d: dict[str, Any]) -> None:
    d["story"]["parts"]["device"] = d["story"]["median_wall_s"] * 3


def _timeline_parts_past_the_step(d: dict[str, Any]) -> None:
    table = _table(d)
    row = table["rows"][-1]
    row[table["columns"].index("part_device_s")] = row[table["columns"].index("wall_s")] * 2


def _share_past_100(d: dict[str, Any]) -> None:
    d["story"]["bound_share"] = 1.5


def _duty_past_100(d: dict[str, Any]) -> None:
    d["view"]["devices"]["devices"][0]["duty"] = "250.0%"


def _figure_column_renamed(d: dict[str, Any]) -> None:
    table = d["view"]["tables"]["frame:device_steps"]  # the device-steps figure's
    table["columns"][table["columns"].index("device")] = "<script>"


def _timeline_column_renamed(d: dict[str, Any]) -> None:
    table = d["view"]["tables"]["timeline"]  # the console's step table reads it by name
    table["columns"][table["columns"].index("transfer_s")] = ""


def _duty_past_one(d: dict[str, Any]) -> None:
    d["view"]["devices"]["devices"][0]["duty"] = 2.5  # a device busy 250% of its span


def _title_not_text(d: dict[str, Any]) -> None:
    d["findings"][0]["title"] = {"nested": [1, 2]}


def _row_too_short(d: dict[str, Any]) -> None:
    _table(d)["rows"][0] = [1]


def _integer_past_any_float(d: dict[str, Any]) -> None:
    d["summary"]["compiles"] = 10**400


def _later_version(d: dict[str, Any]) -> None:
    d["document_version"] = 99


def _kept_more_than_all(d: dict[str, Any]) -> None:
    d["rows_kept"] = {"timeline": {"total": 3, "kept": 9, "first_step": 0, "last_step": 2,
                                   "chosen": "first"}}  # fmt: skip


DAMAGES = [
    _unknown_dtype,
    _text_in_number_column,
    _parts_past_the_step,
    _timeline_parts_past_the_step,
    _share_past_100,
    _duty_past_100,
    _duty_past_one,
    _figure_column_renamed,
    _timeline_column_renamed,
    _title_not_text,
    _row_too_short,
    _integer_past_any_float,
    _later_version,
    _kept_more_than_all,
]


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda f: f.__name__.strip("_"))
def test_a_saved_document_the_schema_refuses_is_one_line_and_its_own_exit_code(
    damage: Any, saved_doc: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN a real saved document damaged in one way
    document = copy.deepcopy(saved_doc)
    damage(document)
    path = tmp_path / "sent.json"
    path.write_text(json.dumps(document))
    # WHEN it is read back
    with pytest.raises(SavedDocumentInvalid) as raised:
        load_saved(path, 2**30)
    # THEN one line names the file and the problem, and no renderer ran
    message = str(raised.value)
    assert "\n" not in message and message.startswith(str(path))


def test_the_cli_refuses_a_damaged_document_in_one_line_with_exit_29(
    saved_doc: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN a saved document asking for a 16 GiB column, and one nested past any bound
    document = copy.deepcopy(saved_doc)
    _unknown_dtype(document)
    (tmp_path / "dtype.json").write_text(json.dumps(document))
    deep = b'{"schema": "xlaprof.analysis/1", "x": ' + deep_json(random.Random(1), 100_000) + b"}"
    (tmp_path / "deep.json").write_bytes(deep)
    for name in ("dtype.json", "deep.json"):
        for command in ("analyze", "report", "check"):
            extra = ("--max-recompilations", "0", "--no-config") if command == "check" else ()
            # WHEN a command reads it
            done = cli(command, *extra, str(tmp_path / name))
            # THEN one line, exit code 29, no traceback
            assert done.returncode == SAVED_EXIT, (name, command, done.stderr)
            assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
            assert str(tmp_path / name) in done.stderr


# A fixed count in CI (each example renders a whole result); XLAPROF_FUZZ_MUTATIONS scales it.
@hypothesis.settings(
    max_examples=max(SMALL, 20), suppress_health_check=list(hypothesis.HealthCheck)
)
@hypothesis.given(seed=st.integers(0, 2**32 - 1), changes=st.integers(1, 4))
def test_a_mutated_saved_document_renders_or_is_refused_in_one_line(
    seed: int, changes: int, saved_doc: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN a real saved document with a few of its values replaced by hostile ones
    rng = random.Random(seed)
    document = copy.deepcopy(saved_doc)
    for _ in range(changes):
        document = mutate_json_value(rng, document)
    path = tmp_path / f"fuzz-{seed}.json"
    path.write_text(json.dumps(document if isinstance(document, dict) else {"x": document}))
    # WHEN it is read and rendered, bounded in time (and in memory: peak RSS growth)
    before = peak_rss()
    try:
        with time_limit(CALL_LIMIT_S):
            try:
                result = load_saved(path, 2**30)
            except XlaprofError as error:
                # THEN either one line of refusal ...
                assert "\n" not in str(error)
                return
            # ... or every renderer shows it
            for name in ("console", "json", "html"):
                _render(name, result.parts[0])
    except Hang:  # pragma: no cover - the failure itself
        pytest.fail(f"seed {seed}: still reading after {CALL_LIMIT_S} s")
    finally:
        assert peak_rss() - before < MEMORY_GROWTH_LIMIT, f"seed {seed}: memory grew"


def test_hostile_values_in_a_table_cell_are_refused_or_shown(
    saved_doc: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN each hostile JSON value in the first cell of each column of a table
    table = _table(saved_doc)
    for column in range(len(table["columns"])):
        for value in HOSTILE_JSON:
            document = copy.deepcopy(saved_doc)
            _table(document)["rows"][0][column] = value
            path = tmp_path / "cell.json"
            path.write_text(json.dumps(document))
            # WHEN read back THEN it is refused in one line, or read with the column's type
            try:
                load_saved(path, 2**30)
            except SavedDocumentInvalid as error:
                assert "\n" not in str(error)
