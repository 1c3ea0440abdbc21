"""A fourth round of hostile inputs (issue 48), through the real command: integers past any
float in every JSON a run or capture holds and in a budgets file, absurd recorded starts
where several runs are told apart, and traces cut into thousands of tiny gzip members.

Each input gets a right answer or one line and its own exit code, never exit 70 (a crash).
"""

from __future__ import annotations

import gzip
import json
import shutil
import zlib
from pathlib import Path
from typing import Any

import pytest
from builders import copy_run
from helpers import cli, sample_run

from xlaprof.errors import BudgetError

HUGE = 10**400  # past any float: float() and math.isfinite() raise OverflowError on it
CRASH = 70


def _huge(text: str) -> str:
    """JSON text with the marker ``"HUGE"`` replaced by the integer literal."""
    return text.replace('"HUGE"', str(HUGE))


def _assert_no_crash(out: Any) -> None:
    assert out.returncode != CRASH, out.stderr[-2000:]
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    if out.returncode != 0:
        assert out.stderr.strip().count("\n") == 0, out.stderr


@pytest.mark.parametrize("field", ["started", "ended", "pid", "steps_recorded"])
def test_a_huge_integer_in_run_json_is_no_crash(tmp_path: Path, field: str) -> None:
    # GIVEN a run whose run.json holds an integer past any float
    run = copy_run(tmp_path)
    info = json.loads((run / "run.json").read_text())
    info[field] = "HUGE"
    (run / "run.json").write_text(_huge(json.dumps(info)))
    # WHEN analyzed THEN a right answer (the damaged file said) or one line, never a crash
    _assert_no_crash(cli("analyze", str(run)))


def test_a_huge_integer_in_steps_jsonl_is_a_skipped_line(tmp_path: Path) -> None:
    # GIVEN a run whose steps.jsonl has one row with an integer past any float
    run = copy_run(tmp_path)
    lines = (run / "steps.jsonl").read_text().splitlines()
    row = json.loads(lines[1])
    row[next(k for k, v in row.items() if isinstance(v, float))] = "HUGE"
    lines[1] = _huge(json.dumps(row))
    (run / "steps.jsonl").write_text("\n".join(lines) + "\n")
    # WHEN analyzed THEN the row is reported as damaged, the run analyzed
    out = cli("analyze", str(run))
    _assert_no_crash(out)
    assert out.returncode == 0, out.stderr


def test_a_huge_timestamp_in_a_chrome_trace_is_no_crash(tmp_path: Path) -> None:
    # GIVEN a Chrome trace whose events' ts and dur are integers past any float
    events = [
        {"name": "step", "ph": "X", "ts": "HUGE", "dur": "HUGE", "pid": 1, "tid": 1},
        {"name": "op", "ph": "X", "ts": 10, "dur": 5, "pid": 1, "tid": 1},
    ]
    path = tmp_path / "host.trace.json.gz"
    path.write_bytes(gzip.compress(_huge(json.dumps({"traceEvents": events})).encode()))
    # WHEN analyzed THEN one line, never a crash
    _assert_no_crash(cli("analyze", str(path)))


def test_a_huge_budget_is_one_line_and_exit_21(tmp_path: Path) -> None:
    # GIVEN a budgets file with a limit past any float (TOML integers are unbounded here)
    budget = tmp_path / "budget.toml"
    budget.write_text(f"max-compile-seconds = {HUGE}\n")
    run = next(sample_run("recompile_varying_batch").glob("*/run.json")).parent
    # WHEN checked THEN the file is refused in one line with the budget error's code
    out = cli("check", str(run), "--budget", str(budget))
    assert out.returncode == BudgetError.exit_code, out.stderr
    assert out.stderr.strip().count("\n") == 0, out.stderr


@pytest.mark.parametrize("start", [1e300, -1e300, 1e18, float("nan")])
def test_an_absurd_start_where_runs_are_told_apart(tmp_path: Path, start: float) -> None:
    # GIVEN a folder holding two runs of one job name, the later one recorded as starting at
    # a moment no calendar has
    folder = tmp_path / "two"
    first = copy_run(folder / "a")
    second = copy_run(folder / "b")
    info = json.loads((second / "run.json").read_text())
    info["started"] = start
    info["ended"] = start
    info.pop("launch", None)
    (second / "run.json").write_text(json.dumps(info))
    info = json.loads((first / "run.json").read_text())
    info.pop("launch", None)
    (first / "run.json").write_text(json.dumps(info))
    # WHEN the folder is analyzed THEN a run is read and the note says which, never a crash
    out = cli("analyze", str(folder))
    _assert_no_crash(out)


def _tiny_members(data: bytes, size: int) -> bytes:
    """``data`` as one gzip member per ``size`` bytes."""
    members = []
    for at in range(0, len(data), size):
        compressor = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        members.append(compressor.compress(data[at : at + size]) + compressor.flush())
    return b"".join(members)


def test_a_trace_in_thousands_of_tiny_gzip_members_reads_as_the_whole(tmp_path: Path) -> None:
    from xlaprof.parse.chrome_trace import read_chrome_document

    # GIVEN a real Chrome trace, and the same bytes cut into a gzip member per 16 bytes
    source = next(sample_run("healthy_loop").glob("*/plugins/profile/*/*.trace.json.gz"))
    text = gzip.decompress(source.read_bytes())[:400_000]
    cut = text[: text.rindex(b"},") + 1] + b"]}"
    whole = tmp_path / "whole.trace.json.gz"
    whole.write_bytes(gzip.compress(cut))
    tiny = tmp_path / "tiny.trace.json.gz"
    tiny.write_bytes(_tiny_members(cut, 16))
    # WHEN both are read THEN they are the same document
    assert read_chrome_document(tiny) == read_chrome_document(whole)


def test_zlib_is_handed_each_byte_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    from xlaprof import safeio

    # GIVEN 20,000 gzip members of 40 bytes each (what made the reader quadratic: zlib copied
    # the rest of a 1 MB chunk after every member's end)
    data = _tiny_members(b"x" * 40 * 20_000, 40)
    fed = 0
    real = zlib.decompressobj

    class Counting:
        def __init__(self, *args: Any) -> None:
            self.inner = real(*args)

        def decompress(self, chunk: bytes, limit: int = 0) -> bytes:
            nonlocal fed
            fed += len(chunk)
            return self.inner.decompress(chunk, limit)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    monkeypatch.setattr(safeio.zlib, "decompressobj", Counting)
    # WHEN it is inflated, whole and as a stream
    whole = safeio.gunzip_capped(data, 10**8)
    streamed = b"".join(safeio.iter_gunzip_capped(io.BytesIO(data), 10**8, "x"))
    # THEN right, and the bytes handed to zlib are bounded per member, not per chunk
    assert whole == streamed == b"x" * 40 * 20_000
    members = 20_000
    # (at most 8 KB handed per member, where a 1 MB chunk was handed again after each one)
    assert fed <= members * 8192 + 4 * len(data), fed


def test_an_item_in_tiny_pieces_is_parsed_a_logarithmic_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from xlaprof.parse import json_stream

    # GIVEN a document whose one item is 200 KB, delivered a character at a time
    document = json.dumps({"traceEvents": [{"name": "x" * 200_000}]})
    parses = 0
    real = json_stream.DECODER

    class Counting:
        def raw_decode(self, text: str, at: int) -> Any:
            nonlocal parses
            parses += 1
            return real.raw_decode(text, at)

    monkeypatch.setattr(json_stream, "DECODER", Counting())
    got: list[Any] = []
    # WHEN it is streamed
    json_stream.JsonStream(iter(document)).document("traceEvents", got.append)
    # THEN the item is read whole, parsed again only as the text held doubles
    assert got == [{"name": "x" * 200_000}]
    assert parses < 40, parses


def test_copy_run_has_the_files_these_tests_damage(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    assert (run / "run.json").is_file() and (run / "steps.jsonl").is_file()
    shutil.rmtree(run)
