"""One cause, one finding, and costs that add up, on real code (issue 47), judged on runs of
two set-ups recorded once (sample_traces/realcode_runs/regenerate.py).

What each must say comes from the set-up's docstring and code and from what the runtime wrote
(its final metrics report's counters, read with a regular expression; each step's own record in
steps.jsonl, read as JSON), never from xlaprof's output. Each failed before: the step split by
a NaN guard's `.item()` charged its compile time once per graph (17.7 s of cost in a run that
compiled for 12.6 s), and two read sites were each charged every read's wait.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import EXAMPLES, REPO, SAMPLES
from recorded import counter, samples

from xlaprof import api
from xlaprof.findings import Finding, Kind

RUNS = SAMPLES / "realcode_runs"
REALCODE = EXAMPLES / "realcode"
sys.path.insert(0, str(EXAMPLES / "corpus"))
import judge  # noqa: E402

pytest.importorskip("google.protobuf")


def analyzed(name: str) -> list[Finding]:
    return api.analyze(RUNS / name, source_root=REPO)


def step_records(name: str) -> list[dict[str, object]]:
    (path,) = RUNS.glob(f"{name}/*/steps.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def expected_lines(script: str, kind: str) -> list[int]:
    source = (REALCODE / f"{script}.py").read_text().splitlines()
    return [n for n, text in enumerate(source, 1) if f"# expect: {kind}" in text]


def test_a_step_split_by_a_read_is_one_recompilation_paid_once() -> None:
    # GIVEN batches padded to their longest (6 lengths in 10 steps) and a NaN guard's .item()
    # before backward(): every step is two graphs, so each new length compiles two
    name = "item_split_padding"
    assert samples(name, "CompileTime") == 12
    assert samples(name, "ExecuteTime") == 20
    assert counter(name, "aten::_local_scalar_dense") == 10
    found = analyzed(name)
    # THEN one recompilation finding, at the padding line, whose cost is at most the compile
    # time of the steps after warm-up (each step paid once, though two graphs compiled in it)
    (finding,) = [f for f in found if f.kind is Kind.RECOMPILATION]
    assert finding.location is not None and Path(finding.location.file).name == f"{name}.py"
    source = (REALCODE / f"{name}.py").read_text().splitlines()
    assert "pad_sequence(" in source[finding.location.line - 1]
    records = step_records(name)
    late = [r for r in records if int(r["step"]) >= 2 and float(r["compile_s"] or 0) > 0]
    assert len(late) == 4  # lengths 17, 21, 25, 29 first seen at steps 3, 5, 7, 9
    assert finding.cost is not None and finding.cost.run_s is not None
    assert finding.cost.run_s == pytest.approx(sum(float(r["compile_s"]) for r in late))
    assert finding.cost.per_step_s is None  # compiled in 4 of 8 steps: paid once per length
    all_compiling = sum(float(r["compile_s"] or 0) for r in records)
    assert sum(f.cost.run_s or 0 for f in found if f.cost) <= sum(
        float(r["wall_s"]) for r in records
    )
    assert finding.cost.run_s <= all_compiling
    # AND the read is one host-sync finding at the guard, splitting the step
    (sync,) = [f for f in found if f.kind is Kind.HOST_SYNC]
    assert sync.location is not None and sync.location.line == judge.marked_line(
        name, "host_sync", REALCODE
    )
    assert sync.evidence["reads_at_site"] == 10 and sync.evidence["splits_step_graph"] is True


def test_two_read_sites_in_two_functions_share_the_reads_time() -> None:
    # GIVEN a training loop and a separate evaluate(), each through MpDeviceLoader, each
    # reading its loss per batch: 24 and 9 reads
    name = "mp_eval_reads"
    assert counter(name, "aten::_local_scalar_dense") == 24 + 9
    syncs = [f for f in analyzed(name) if f.kind is Kind.HOST_SYNC]
    # THEN each line has its own finding with its own count
    train_line, eval_line = expected_lines(name, "host_sync")
    by_line = {f.location.line: f for f in syncs if f.location is not None}
    assert set(by_line) == {train_line, eval_line}
    assert by_line[train_line].evidence["reads_at_site"] == 24
    assert by_line[eval_line].evidence["reads_at_site"] == 9
    # AND their costs add up to no more than the run's time in reads (steps.jsonl), in the
    # ratio of their reads
    records = step_records(name)
    reading = sum(float(r["from_device_s"] or 0) for r in records)
    costs = {line: f.cost for line, f in by_line.items()}
    assert all(c is not None and c.run_s is not None for c in costs.values())
    total = sum(c.run_s for c in costs.values() if c and c.run_s)
    assert total == pytest.approx(reading, rel=1e-6)
    train, evaluation = costs[train_line], costs[eval_line]
    assert train and evaluation and train.run_s and evaluation.run_s
    assert train.run_s / evaluation.run_s == pytest.approx(24 / 9)
