"""The metrics report parser (``xlaprof.parse.metrics_report``) on real reports (the sample
logs, the live runtime's own) and on the messy shapes found in logs: odd values, any text, and
thousands of reports in bounded memory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from builders import one_metrics_report
from hypothesis import given, settings
from hypothesis import strategies as st

from xlaprof.parse.metrics_report import DEFAULT_MAX_REPORTS, parse_metrics_report

SAMPLE_NAMES = ["healthy_loop", "recompile_varying_batch", "host_sync_item", "cpu_fallback"]


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_real_cpu_reports_parse_cleanly(samples, name: str) -> None:
    # GIVEN a job log captured from the CPU runtime, with a full metrics_report() at the end
    result = parse_metrics_report((samples / f"{name}.log").read_text())
    # THEN exactly one report is found, fully readable, with the core metrics in base units
    assert result.warnings == []
    assert len(result.reports) == 1
    report = result.reports[0]
    compile_time = report.metrics["CompileTime"]
    assert compile_time.unit == "s"
    assert compile_time.total_samples is not None and compile_time.total_samples >= 2
    assert 0 < compile_time.accumulator < 600
    assert report.metrics["OutboundData"].unit == "B"
    assert report.counters["MarkStep"] >= 12
    # order is kept: the report prints metrics before counters within each section
    names = list(report.metrics)
    assert names.index("DeviceLockWait") < names.index("CompileTime")


def test_messy_log(data_dir) -> None:
    result = parse_metrics_report((data_dir / "messy_metrics.log").read_text())
    steps = [r.step for r in result.reports]
    assert steps == [10, 20, None]  # two [MetricsData] sections, then a repeated snapshot
    first = result.reports[0]
    assert list(first.metrics) == ["CompileTime", "ExecuteTime", "OutboundData"]
    assert first.metrics["CompileTime"].accumulator == pytest.approx(18.450018269)
    assert first.metrics["CompileTime"].value_rate == pytest.approx(1.2)
    assert first.metrics["ExecuteTime"].accumulator == pytest.approx(70e-9)
    assert first.metrics["OutboundData"].accumulator == pytest.approx(1.5 * 1024**3)
    assert first.metrics["OutboundData"].percentiles[50.0] == pytest.approx(512 * 1024**2)
    # program output glued before and after the fields does not hide them
    assert first.counters == {"CachedCompile": 7, "aten::nonzero": 20, "MarkStep": 10}
    # "02h42m54s123ms456.789us" as torch_xla prints it: every field but the last is rounded
    # (54.12 s is 0.9 min, so "42m" holds 41 whole minutes, and 41.9 min rounds "01h" up)
    assert result.reports[1].metrics["CompileTime"].accumulator == pytest.approx(6114.123456789)
    # the truncated last line is reported, and what was readable before it is kept
    last = result.reports[2].metrics["CompileTime"]
    assert last.percentiles == {1.0: pytest.approx(0.010094235)}
    assert any("5%=01" in w.reason for w in result.warnings)


def test_nan_percentile_is_kept(data_dir) -> None:
    result = parse_metrics_report((data_dir / "messy_metrics.log").read_text())
    value = result.reports[0].metrics["ExecuteTime"].percentiles[99.0]
    assert value != value  # nan


def test_xrt_2019_format(data_dir) -> None:
    result = parse_metrics_report((data_dir / "xrt_2019_metrics.txt").read_text())
    assert result.warnings == []
    (report,) = result.reports
    # "Counter:" inside a Metric block is the accumulator field, not a counter
    # "06s460ms740.516us": the 2019 formatter rounded fields as today's does ("460ms"
    # is 459.74 ms rounded, since 0.74 ms is left below it)
    assert report.metrics["CompileTime"].accumulator == pytest.approx(6.459740516)
    assert "06s460ms740.516us" not in report.counters
    assert report.metrics["CompileTime"].percentiles[25.0] == pytest.approx(0.001043596)
    assert report.metrics["TransferFromServerTime"].percentiles == {}
    allocate = report.metrics["XrtAllocateFromTensor_Empty"]
    assert allocate.mean == pytest.approx(41.19e-6) and allocate.stddev == pytest.approx(15.311e-6)
    assert allocate.rate is None and allocate.accumulator is None
    assert report.metrics["InboundData"].unit == "B"
    assert report.counters["aten::_ctc_loss"] == 25


def test_indented_and_repl_lines() -> None:
    text = "\n".join(
        [
            ">>> print(met.short_metrics_report())",
            "    Counter: CachedCompile",
            "        Value: 3",
            "    Metric: CompileTime",
            "        TotalSamples: 2",
            "        Accumulator: 528ms296.280us",
        ]
    )
    (report,) = parse_metrics_report(text).reports
    assert report.counters == {"CachedCompile": 3}
    assert report.metrics["CompileTime"].accumulator == pytest.approx(0.52829628)


def test_to_frame_types(samples) -> None:
    frame = parse_metrics_report((samples / "healthy_loop.log").read_text()).to_frame()
    assert set(frame["kind"].cat.categories) == {"metric", "counter"}
    assert str(frame["total_samples"].dtype) == "Int64"
    compile_row = frame[frame["name"] == "CompileTime"].iloc[0]
    assert compile_row["unit"] == "s" and compile_row["value"] > 0


@settings(max_examples=200)
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str) -> None:
    result = parse_metrics_report(text)
    assert isinstance(result.reports, list)


_name = st.from_regex(r"[A-Z][A-Za-z]{2,12}", fullmatch=True)


@settings(max_examples=100)
@given(
    st.dictionaries(_name, st.integers(min_value=0, max_value=10**9), min_size=1, max_size=6),
    st.lists(st.sampled_from(["", "2024-01-01 00:00:00 INFO ", "[host-3] ", "I0101 log.cc:1] "])),
)
def test_counters_survive_any_prefix(counters: dict[str, int], prefixes: list[str]) -> None:
    prefix = prefixes[0] if prefixes else ""
    lines = []
    for name, value in counters.items():
        lines += [f"{prefix}Counter: {name}", f"{prefix}  Value: {value}"]
    (report,) = parse_metrics_report("\n".join(lines)).reports
    assert report.counters == counters


@settings(max_examples=150)
@given(text=st.text(max_size=400))
def test_any_text_parses_and_its_warnings_name_lines(text: str) -> None:
    # GIVEN any text WHEN it is parsed as a metrics report THEN it parses, no more reports are
    # kept than seen, and every warning names a line
    metrics = parse_metrics_report(text)
    assert metrics.reports_seen >= len(metrics.reports)
    assert all(w.line >= 0 for w in metrics.warnings)


def test_a_counter_of_1e308_is_not_read_as_1() -> None:
    result = parse_metrics_report("Counter: Foo\n  Value: 1e308\nCounter: Bar\n  Value: 20x\n")
    counters = result.reports[0].counters
    assert counters["Foo"] is None  # unreadable, and said so
    assert counters["Bar"] == 20  # program output glued onto a count is still a count
    assert any("Foo" in w.reason for w in result.warnings)


def test_a_negative_duration_keeps_its_unit() -> None:
    result = parse_metrics_report("Metric: CompileTime\n  TotalSamples: 3\n  Accumulator: -10s\n")
    metric = result.reports[0].metrics["CompileTime"]
    assert (metric.accumulator, metric.unit) == (-10.0, "s")


def test_a_count_longer_than_int64_is_refused() -> None:
    result = parse_metrics_report("Metric: X\n  TotalSamples: 99999999999999999999999\n")
    assert result.reports[0].metrics["X"].total_samples is None
    assert result.warnings


_REPORT = one_metrics_report()


def test_metrics_parser_keeps_a_bounded_number_of_reports() -> None:
    # GIVEN 3000 snapshots whose MarkStep counter is the snapshot's number
    def lines():
        for index in range(3000):
            yield f"[MetricsData; step={index}]"
            yield from re.sub(
                r"(Counter: MarkStep\n\s+Value: )\d+", rf"\g<1>{index}", _REPORT
            ).split("\n")

    result = parse_metrics_report(lines())
    # THEN at most DEFAULT_MAX_REPORTS are kept: the first, the last, evenly spaced between
    assert result.reports_seen == 3000
    assert len(result.reports) <= DEFAULT_MAX_REPORTS
    steps = [r.step for r in result.reports]
    assert steps[0] == 0 and steps[-1] == 2999 and steps == sorted(steps)
    assert result.reports[-1].counter("MarkStep") == 2999
    assert any("3000 metrics reports" in w.reason for w in result.warnings)


def test_reports_of_the_live_runtime_parse_without_warnings(live_runtime_job) -> None:
    stdout, _stderr, _tracker = live_runtime_job
    result = parse_metrics_report(stdout)
    assert result.warnings == []
    full, short = result.reports  # metrics_report() then short_metrics_report()
    assert set(short.metrics) <= set(full.metrics)
    assert full.metrics["CompileTime"].total_samples == short.metrics["CompileTime"].total_samples
    assert full.counters["aten::median"] == 3
    assert full.counters["aten::_local_scalar_dense"] == 3


# Twelve graphs of distinct sizes, each read back: every time metric gets samples, then the
# report is printed beside what the runtime itself holds (metric_data: count, accumulator).
# The runtime records an execution's ExecuteTime when it completes, which may be after .item()
# has its value: the report and the data are read until the data is the same before and after
# the report (no execution completed between them), once the device is idle.
_ACCUMULATOR_JOB = """
import json, torch, torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
device = torch_xla.device()
for rows in range(2, 14):
    x = torch.randn(rows, 8, device=device)
    (x @ x.T).relu().sum().item()
xm.wait_device_ops()
def data():
    return {name: list(met.metric_data(name)[:2]) for name in met.metric_names()}
for _ in range(100):
    before = data()
    report = met.metrics_report()
    after = data()
    if before == after:
        break
print(report)
print("@@DATA@@" + json.dumps(after))
"""


def test_durations_read_as_the_runtime_holds_them(tmp_path) -> None:
    # GIVEN a metrics report printed by the live runtime and the runtime's own metric_data
    script = tmp_path / "job.py"
    script.write_text(_ACCUMULATOR_JOB)
    env = {**os.environ, "PJRT_DEVICE": "CPU"}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report_text, data_text = done.stdout.split("@@DATA@@")
    truth = json.loads(data_text)
    # WHEN the printed report is parsed
    report = parse_metrics_report(report_text).reports[0]
    # THEN every duration's accumulator is the runtime's (nanoseconds), though torch_xla's
    # formatter prints each field but the last rounded ("049ms677us" for 48.677 ms)
    times = [name for name, metric in report.metrics.items() if metric.unit == "s"]
    assert {"CompileTime", "ExecuteTime", "TransferFromDeviceTime"} <= set(times)
    for name in times:
        _count, accumulator_ns = truth[name]
        parsed = report.metrics[name].accumulator
        assert parsed == pytest.approx(accumulator_ns / 1e9, rel=1e-9, abs=2e-9), name
