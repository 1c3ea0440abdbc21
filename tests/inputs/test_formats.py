"""The registry of input formats (``xlaprof.inputs.formats``): one entry per format, each path
sniffed once and named by the first entry that claims it, and read once by its loader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import SAMPLES, cli, sample_capture, sample_run

from xlaprof.inputs.formats import FORMATS, format_of, sniff_path


def test_each_format_has_one_entry_that_says_what_it_yields() -> None:
    # GIVEN the registry THEN every format is named once and says what loading it gives
    names = [f.name for f in FORMATS]
    assert len(names) == len(set(names))
    assert {"saved_result", "run", "torch_trace", "capture", "files"} == set(names)
    assert all(f.yields for f in FORMATS)
    # AND the last claims every path (report and log files: what is left)
    assert FORMATS[-1].name == "files"


def test_each_real_input_is_sniffed_as_its_format(tmp_path: Path) -> None:
    # GIVEN a run directory, a capture, a metrics/debug log, a TORCH_TRACE log folder and a
    # saved result, all real
    run = sample_run("recompile_varying_batch")
    capture = sample_capture("recompile_varying_batch")
    log = SAMPLES / "recompile_varying_batch.log"
    done = cli("analyze", "--json", str(run))
    assert done.returncode == 0, done.stderr
    saved = tmp_path / "saved.json"
    saved.write_text(done.stdout)
    assert json.loads(done.stdout)["schema"] == "xlaprof.analysis/1"
    # WHEN each is sniffed THEN its format is the one it is
    got = {path: format_of(sniff_path(path)).name for path in (run, capture, log, saved)}
    assert got == {run: "run", capture: "capture", log: "files", saved: "saved_result"}
    # AND what was found is the path's own: the run directories under the run, none else
    assert sniff_path(run).runs and not sniff_path(capture).runs and not sniff_path(log).runs


def test_a_saved_result_given_with_another_input_is_refused_in_one_line(tmp_path: Path) -> None:
    from xlaprof.errors import InputNotRecognized

    # GIVEN a saved result and a log, given together
    done = cli("analyze", "--json", str(SAMPLES / "recompile_varying_batch.log"))
    assert done.returncode == 0, done.stderr
    saved = tmp_path / "saved.json"
    saved.write_text(done.stdout)
    # WHEN both are analyzed THEN one line says a saved result is read alone, with its code
    refused = cli("analyze", str(saved), str(SAMPLES / "recompile_varying_batch.log"))
    assert refused.returncode == InputNotRecognized.exit_code
    assert refused.stderr.strip().splitlines() == [
        f"xlaprof: error: {saved}: a saved result is read alone, not with other inputs"
    ]


def test_a_torch_trace_folder_is_its_own_format_and_joins_a_capture_beside_it() -> None:
    # GIVEN the folder TORCH_TRACE wrote (two ranks' logs) WHEN it is sniffed THEN it is a
    # TORCH_TRACE input
    assert format_of(sniff_path(SAMPLES / "torch_trace")).name == "torch_trace"
    # AND a folder holding a capture and its run's TORCH_TRACE folder is seen to hold both
    beside = sniff_path(SAMPLES / "host_capture")
    assert beside.capture and (beside.torch_beside or beside.torch_log)


def test_loading_looks_for_a_folders_runs_once_and_reads_each_run_record_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from xlaprof.inputs.paths import DEFAULT_MAX_INPUT_BYTES, load_parts
    from xlaprof.rundir import reader

    # GIVEN a run directory, and the run finder and the run record's reader counted
    run = sample_run("recompile_varying_batch")
    looked: list[Path] = []
    read: list[Path] = []
    find_runs, read_info = reader.find_runs, reader.read_info

    def counted_find(path: Path) -> list[Path]:
        looked.append(Path(path))
        return find_runs(path)

    def counted_read(directory: Path, follow: bool = True) -> reader.RunInfo:
        read.append(Path(directory))
        return read_info(directory, follow)

    monkeypatch.setattr(reader, "find_runs", counted_find)
    monkeypatch.setattr(reader, "read_info", counted_read)
    # WHEN it is loaded as a request loads it
    parts = load_parts([run], DEFAULT_MAX_INPUT_BYTES)
    # THEN its runs were looked for once and each run's record read once
    assert looked == [run]
    assert len(read) == len(parts) == len(set(read))
