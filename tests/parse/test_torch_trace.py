"""TORCH_TRACE logs (``xlaprof.parse.torch_trace``) read as an input, checked against tlparse.

The logs are real (sample_traces/torch_trace/README.md): ``compile_script.py`` under
``torch.compile`` with aot_eager, openxla (torch_xla on the CPU device) and a warm inductor,
changing a batch size, a Python constant and breaking the graph on ``print``. Expected counts
come from tlparse 0.4.3 run on the same log (its ``compile_directory.json`` and the restart
count of its index page), expected lines from the script itself.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import SAMPLES

from xlaprof.api import analyze
from xlaprof.errors import InputNotRecognized, InputTooLarge
from xlaprof.findings import Kind
from xlaprof.inputs.torch_traces import is_torch_trace_file
from xlaprof.parse.torch_trace import parse_torch_trace, read_torch_trace

LOGS = SAMPLES / "torch_trace"
NAMES = ("aot_eager", "openxla", "inductor_warm")
SCRIPT = "compile_script.py"
# compile_script.py's lines (it is beside the logs)
CONSTANT_LINE, ASSIGN_LINE, CALL_LINE, BREAK_LINE, DEF_LINE = 22, 40, 41, 23, 21


def _tlparse() -> str:
    found = shutil.which("tlparse") or str(Path(sys.executable).with_name("tlparse"))
    assert Path(found).is_file(), "tlparse (a dev dependency: make setup) is not installed"
    return found


def _tlparse_counts(log: Path, out: Path) -> dict[str, Any]:
    """What tlparse says of ``log``: compile ids, recompile-reason artifacts, restarts."""
    subprocess.run(
        [_tlparse(), str(log), "-o", str(out), "--no-browser", "--overwrite"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    directory = json.loads((out / "compile_directory.json").read_text())
    # tlparse files records outside any compile under "[-/-]": not a compile
    ids = {re.sub(r"_\d+\]$", "]", key) for key in directory} - {"[-/-]"}
    artifacts = [a["name"] for entry in directory.values() for a in entry["artifacts"]]
    page = re.sub(r"<[^>]+>", "", (out / "index.html").read_text())
    restarts = re.search(r"This run had\s+(\d+) restart", page)
    return {
        "compile_ids": ids,
        "recompile_reasons": sum(1 for a in artifacts if a.startswith("recompile_reasons")),
        "restarts": int(restarts.group(1)) if restarts else 0,
        "cache_hits": sum(1 for a in artifacts if "_cache_hit" in a),
        "cache_misses": sum(1 for a in artifacts if "_cache_miss" in a),
    }


@pytest.fixture(scope="module", params=NAMES)
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    name = request.param
    gz = LOGS / f"{name}.log.gz"
    assert gz.is_file(), f"{gz}: missing (sample_traces/torch_trace/README.md regenerates it)"
    folder = tmp_path_factory.mktemp(name)
    log = folder / f"dedicated_log_torch_trace_{name}.log"
    log.write_bytes(gzip.decompress(gz.read_bytes()))  # tlparse reads plain text only
    return name, gz, log, _tlparse_counts(log, folder / "tl_out")


def test_counts_agree_with_tlparse(case) -> None:
    # GIVEN a real log and tlparse's reading of it
    _, gz, log, tl = case
    # WHEN xlaprof reads the gzipped copy and the plain log
    parsed = read_torch_trace(gz, 64 * 1024**2)
    plain = read_torch_trace(log, 64 * 1024**2)
    # THEN the compile ids, recompiles, graph breaks and cache results are tlparse's
    ids = {f"[{c.compile_id}]" for c in parsed.compiles}
    assert ids == tl["compile_ids"]
    assert parsed.recompiles == tl["recompile_reasons"] == 3
    assert parsed.graph_breaks == tl["restarts"] == 3
    counts = parsed.cache_counts()
    assert sum(v for k, v in counts.items() if "_cache_hit" in k) == tl["cache_hits"]
    assert sum(v for k, v in counts.items() if "_cache_miss" in k) == tl["cache_misses"]
    assert [c.compile_id for c in plain.compiles] == [c.compile_id for c in parsed.compiles]
    assert parsed.skipped_lines == 0
    # AND the report's header counts the log's compiles (not "—": no torch_xla counter ran)
    from xlaprof.model.request import AnalysisRequest
    from xlaprof.pipeline import analyze as analysis

    (part,) = analysis(AnalysisRequest((gz,))).parts
    assert part.counts is not None and part.counts.compiles == len(tl["compile_ids"])
    assert part.figures["compiles"] == len(tl["compile_ids"])


def test_findings_name_each_change_at_the_users_line(case) -> None:
    # GIVEN a log of the script (a shape change, a constant change, a graph break)
    _, gz, _, tl = case
    # WHEN it is analyzed like any other input, with the script's folder as source root
    findings = analyze(gz, source_root=LOGS)
    recompiles = [f for f in findings if f.kind is Kind.RECOMPILATION]
    breaks = [f for f in findings if f.kind is Kind.GRAPH_BREAK]
    # THEN the shape change: dynamo's size guard, at the call (or the line making the batch,
    # where the source is readable), with the sizes it saw
    shape = next(f for f in recompiles if "size mismatch" in str(f.evidence["guard_failure"]))
    assert shape.evidence["sizes_seen"] == [8, 5]
    assert "expected 8, actual 5" in shape.evidence["dynamo_reasons"][0]
    assert str(shape.evidence["call_site"]).endswith(f"{SCRIPT}:{CALL_LINE}")
    assert shape.location is not None and shape.location.file.endswith(SCRIPT)
    assert shape.location.line in (ASSIGN_LINE, CALL_LINE)
    # the constant: dynamo's guard on scale, at the line that reads it
    constant = next(f for f in recompiles if "scale" in f.title)
    assert constant.evidence["dynamo_reasons"][0].startswith("scale == 2.0")
    assert constant.location is not None and constant.location.line == CONSTANT_LINE
    assert constant.location.file.endswith(SCRIPT)
    # the graph break: at the print, with dynamo's reason
    (graph_break,) = breaks
    assert graph_break.location is not None
    assert str(graph_break.location).endswith(f"{SCRIPT}:{BREAK_LINE}")
    assert graph_break.evidence["reason"] == "Failed to trace builtin operator"
    # and the counts are tlparse's: every recompile (split-off functions too), every break
    assert sum(f.evidence["dynamo_recompiles"] for f in recompiles) == tl["recompile_reasons"]
    assert graph_break.evidence["breaks"] == tl["restarts"]


def test_a_torch_trace_folder_reads_like_its_log(tmp_path: Path) -> None:
    # GIVEN the folder TORCH_TRACE pointed at, holding one log and an unrelated file
    folder = tmp_path / "trace"
    folder.mkdir()
    (folder / "dedicated_log_torch_trace_x.log").write_bytes(
        gzip.decompress((LOGS / "aot_eager.log.gz").read_bytes())
    )
    (folder / "notes.txt").write_text("not a log\n")
    # THEN it gives the findings its log gives
    assert [f.title for f in analyze(folder)] == [
        f.title for f in analyze(LOGS / "aot_eager.log.gz")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\t\t\t\n" * 50,
        "V1127 14:07:16.065000 9366 torch/x.py:1] not json\n",
        "V1127 14:07:16.065000 9366 torch/x.py:1] " + "[" * 100_000 + "\n",
        "V1127 14:07:16.065000 9366 torch/x.py:1] []\n",
        "hello\nworld\n",
    ],
)
def test_hostile_text_is_no_record_and_never_a_traceback(tmp_path: Path, text: str) -> None:
    path = tmp_path / "dedicated_log_torch_trace_bad.log"
    path.write_text(text)
    with pytest.raises(InputNotRecognized, match="no TORCH_TRACE record"):
        read_torch_trace(path, 1024**2)


def test_damaged_records_are_skipped_and_unknown_keys_ignored() -> None:
    # GIVEN the first records of a real log, with lines cut, values of the wrong type and an
    # unknown record kind between them
    raw = gzip.decompress((LOGS / "aot_eager.log.gz").read_bytes()).decode().splitlines()
    damaged = [
        *raw[:40],
        raw[40][:30],
        'V1127 14:07:17.280000 9366 x.py:1] {"compilation_metrics": {"compile_id": 5, '
        '"co_name": [], "duration_us": "long", "restart_reasons": {"a": 1}}, "frame_id": "0"}',
        'V1127 14:07:17.280000 9366 x.py:1] {"something_new": {"k": 1}, "frame_id": 0, '
        '"frame_compile_id": 0, "has_payload": "x"}',
        "\tpayload of something new",
        *raw[41:],
    ]
    log = parse_torch_trace(damaged)
    # THEN the log still reads, the cut line counted, the unknown kind counted and skipped
    assert log.skipped_lines == 1
    assert log.kinds["something_new"] == 1
    assert log.recompiles == 3


@pytest.mark.parametrize("packed", [False, True])
def test_a_log_cut_short_is_named_damaged_with_what_was_kept(tmp_path: Path, packed: bool) -> None:
    # GIVEN a real log cut in the middle of a record line (as text, or as its gzip stream cut
    # short: a copy stopped mid-way)
    text = gzip.decompress((LOGS / "aot_eager.log.gz").read_bytes())
    lines = text.splitlines(keepends=True)
    whole = sum(1 for line in lines if not line.startswith(b"\t"))
    cut = b"".join(lines[:60]) + lines[60][:25]
    if packed:
        path = tmp_path / "dedicated_log_torch_trace_cut.log.gz"
        path.write_bytes(gzip.compress(text)[: len(gzip.compress(cut)) - 10])
    else:
        path = tmp_path / "dedicated_log_torch_trace_cut.log"
        path.write_bytes(cut)
    # WHEN it is read
    log = read_torch_trace(path, 64 * 1024**2)
    # THEN it says it is damaged and how many records it kept, which are fewer than the log's
    (note,) = [w for w in log.warnings if "damaged" in w]
    assert ("gzip stream ends early" if packed else "last line is cut") in note
    assert f"the {log.records:,} records before the cut are kept" in note
    assert 0 < log.records < whole


def test_a_whole_log_is_not_called_damaged() -> None:
    log = read_torch_trace(LOGS / "aot_eager.log.gz", 64 * 1024**2)
    assert not [w for w in log.warnings if "damaged" in w]


def test_a_log_over_the_size_limit_is_refused() -> None:
    with pytest.raises(InputTooLarge):
        read_torch_trace(LOGS / "aot_eager.log.gz", 1000)


def test_only_logs_are_taken_for_logs(tmp_path: Path) -> None:
    metrics = SAMPLES / "healthy_loop.log"
    assert not is_torch_trace_file(metrics)
    assert is_torch_trace_file(LOGS / "openxla.log.gz")
    fifo = tmp_path / "fifo"
    import os

    os.mkfifo(fifo)
    assert not is_torch_trace_file(fifo)


def test_ranks_whose_compiles_diverge(tmp_path: Path) -> None:
    # GIVEN the per-rank logs of a two-rank job (gloo, CPU) where only rank 1's batch shrinks
    ranks = LOGS / "ranks"
    logs = sorted(ranks.glob("*.log.gz"))
    assert len(logs) == 2, f"{ranks}: the two ranks' logs (README.md there)"
    # tlparse's compile ids of each rank's log
    ids = []
    for index, gz in enumerate(logs):
        plain = tmp_path / gz.name.removesuffix(".gz")
        plain.write_bytes(gzip.decompress(gz.read_bytes()))
        ids.append(_tlparse_counts(plain, tmp_path / f"tl_{index}")["compile_ids"])
    assert ids == [{"[0/0]"}, {"[0/0]", "[0/1]"}]
    # WHEN the folder is analyzed
    (finding,) = [f for f in analyze(ranks, source_root=ranks) if "differ across ranks" in f.title]
    # THEN rank 1 is named, with tlparse's counts and dynamo's reason, at the compiled function
    assert finding.evidence["compiles_per_rank"] == {"rank 0": len(ids[0]), "rank 1": len(ids[1])}
    assert "expected 8, actual 5" in finding.evidence["their_recompile_reasons"][0]
    assert finding.location is not None and finding.location.file.endswith("two_ranks.py")
    assert finding.location.line == 14  # def step_fn(x, w):


def test_compile_time_per_graph_is_measured_without_crying_wolf() -> None:
    # GIVEN a log whose compiles took 0.05 to 0.4 s each (the openxla one)
    from xlaprof.analyzers import slow_compile
    from xlaprof.inputs.torch_traces import add_torch_traces
    from xlaprof.model.input import AnalysisInput

    data = AnalysisInput()
    add_torch_traces(data, [LOGS / "openxla.log.gz"], 64 * 1024**2)
    seconds = [c.seconds for c in data.torch_traces[0].compiles]
    # THEN slow_compile could judge it (measured) and finds nothing slow in it
    assert slow_compile.unmeasured(data) is None
    assert max(seconds) < slow_compile.SLOW_COMPILE_MEAN_SECONDS
    assert slow_compile.analyze(data) == []


def test_xlaprof_run_points_torch_trace_into_its_folder(tmp_path: Path) -> None:
    from xlaprof.cli.run import job_environment

    env = job_environment(tmp_path, "launch", None, None, 0, None, False, 0.0)
    assert env["TORCH_TRACE"] == str(tmp_path.resolve() / "torch_trace")
    import os

    os.environ["TORCH_TRACE"] = "/somewhere/else"
    try:  # a job that sets its own keeps it
        env = job_environment(tmp_path, "launch", None, None, 0, None, False, 0.0)
        assert env["TORCH_TRACE"] == "/somewhere/else"
    finally:
        del os.environ["TORCH_TRACE"]


def test_a_folder_left_by_xlaprof_run_without_torch_xla_reads_its_log(tmp_path: Path) -> None:
    # GIVEN what `xlaprof run` leaves for a torch.compile script that never imports torch_xla:
    # only <out>/torch_trace/<log>
    (tmp_path / "torch_trace").mkdir()
    (tmp_path / "torch_trace" / "dedicated_log_torch_trace_x.log").write_bytes(
        gzip.decompress((LOGS / "aot_eager.log.gz").read_bytes())
    )
    assert [f.title for f in analyze(tmp_path)] == [
        f.title for f in analyze(LOGS / "aot_eager.log.gz")
    ]


def test_a_real_torch_tpu_log_with_a_failed_compile(tmp_path: Path) -> None:
    # GIVEN TorchTPU's own TORCH_TRACE log of a torch.compile(backend="tpu") that failed
    # (torch 2.13 + torch_tpu 0.2.0 without a TPU: torchtpu/README.md)
    gz = LOGS / "torchtpu" / "torch_tpu_compile_failed.log.gz"
    plain = tmp_path / "dedicated_log_torch_trace_tpu.log"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    tl = _tlparse_counts(plain, tmp_path / "tl")
    log = read_torch_trace(gz, 64 * 1024**2)
    # THEN its compile is tlparse's, failed as tlparse counts it, TorchTPU's artifact counted
    assert {f"[{c.compile_id}]" for c in log.compiles} == tl["compile_ids"] == {"[0/0]"}
    failed = [c for c in log.compiles if c.fail_type]
    assert len(failed) == tl["restarts"] == 1
    assert failed[0].fail_type == "BackendCompilerFailed"
    assert log.artifacts["torchtpu_fx_graph"] == 1
    assert log.tpu_batches == []  # no eager batch without a TPU


def test_compiles_are_capped_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a cap of two compiles (a hostile log could name millions)
    from xlaprof.parse import torch_trace

    monkeypatch.setattr(torch_trace, "MAX_COMPILES", 2)
    raw = gzip.decompress((LOGS / "aot_eager.log.gz").read_bytes()).decode().splitlines()
    log = parse_torch_trace(raw)
    # THEN the first two are kept, and the log says the rest were not
    assert [c.compile_id for c in log.compiles] == ["0/0", "1/0"]
    assert any("only the first 2 compiles" in w for w in log.warnings)


# -- issue 48: any bytes where a TORCH_TRACE log is expected -----------------------------------
def _hostile_record(value: Any) -> str:
    """A TORCH_TRACE record line whose metadata holds ``value`` (integers past any float
    written out in digits, as a hostile log can)."""
    body = json.dumps({"dynamo_start": {"stack": value}, "frame_id": value, "attempt": value})
    return f"V1127 14:07:16.065000 9366 torch/_dynamo/utils.py:1952] {body}"


def test_any_damaged_torch_trace_reads_or_is_refused_in_one_error(tmp_path: Path) -> None:
    import random

    import hypothesis
    from fuzzing import HOSTILE_JSON, Hang, mutate_text, time_limit
    from hypothesis import strategies as st

    from xlaprof.errors import XlaprofError

    real = gzip.decompress((LOGS / "openxla.log.gz").read_bytes()).decode()[:200_000]
    adversarial = [
        "V1127 14:07:16.065000 9366 " + " " * 200_000 + "]",
        "V1127 14:07:16.065000 9366 x.py:1] " + '{"a": ' + "9" * 5000 + "}",
        "[rank1]:" + "[rank1]:" * 20_000,
        "Graph Break Reason: " + " " * 200_000,
    ]

    @hypothesis.settings(max_examples=25, database=None)
    @hypothesis.given(
        seed=st.integers(0, 2**32),
        value=st.sampled_from([*HOSTILE_JSON, "HUGE"]),
        long_line=st.sampled_from(["", *adversarial]),
    )
    def check(seed: int, value: Any, long_line: str) -> None:
        rng = random.Random(seed)
        record = _hostile_record(value).replace('"HUGE"', str(10**400))
        text = mutate_text(rng, real) + "\n" + record + "\n" + long_line + "\n"
        path = tmp_path / "dedicated_log_torch_trace_x.log"
        path.write_text(text, errors="surrogatepass")
        # WHEN read THEN a log, or one of xlaprof's errors, within a bound only a hang reaches
        try:
            with time_limit(60):
                read_torch_trace(path, 8 * 1024**2)
        except XlaprofError:
            pass
        except Hang as error:  # pragma: no cover - the property's failure
            raise AssertionError(f"seed {seed}: {error}") from None

    check()
