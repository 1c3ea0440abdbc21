"""The step boundary's cheap paths keep every per-step figure it recorded before.

The boundary no longer reads the ``aten::`` counters when the fallback log did not grow, no
longer collects the host sampler's ticks at each step (the sampler charges the step in progress
itself) and reads log sizes from files it opened at the start. Expected values come from the
bare runtime (the same script run without xlaprof prints its own counter deltas per step) and
from the script's own clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cli

from xlaprof.capture.sampler import HostSampler
from xlaprof.parse.metrics_report import parse_metrics_report
from xlaprof.rundir.reader import load_run
from xlaprof.rundir.schema import FINAL_METRICS, METRICS_DIR

pytestmark = pytest.mark.runtime

SCRIPT = r"""
import json, sys, time
import torch, torch_xla

X = torch_xla._XLAC
BURN_STEPS = {2, 6}
FALLBACK_STEP = 5


def aten():
    return {n: X._xla_counter_value(n) for n in X._xla_counter_names() if n.startswith("aten::")}


def samples(name):
    data = X._xla_metric_data(name)
    return 0 if data is None else data[0]


def synchronous():
    # settled when a sync returns: compiles and traced ops (executions end on another thread)
    return samples("CompileTime"), samples("LazyTracing")


def burn(seconds):
    start = time.thread_time()
    while time.thread_time() - start < seconds:  # BURN LINE
        pass
    return time.thread_time() - start


device = torch_xla.device()
x = torch.randn(64, device=device)
before = aten()
counts = synchronous()
for step in range(9):
    x = x * 0.5 + 1.0
    if step == FALLBACK_STEP:
        x = x + torch.median(x)  # a CPU fallback, first seen at this step
    burned = burn(0.15) if step in BURN_STEPS else 0.0
    torch_xla.sync()
    now = aten()
    delta = {k: v - before.get(k, 0) for k, v in now.items() if v != before.get(k, 0)}
    before = now
    now_counts = synchronous()
    compiles, ops = (a - b for a, b in zip(now_counts, counts))
    counts = now_counts
    row = {"step": step, "aten": delta, "burned": burned, "compiles": compiles, "ops": ops}
    print(json.dumps(row), file=sys.stderr)
"""


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "late_fallback.py"
    path.write_text(SCRIPT)
    return path


def _bare(script: Path) -> list[dict]:
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, "PJRT_DEVICE": "CPU"},
        cwd=REPO,
        timeout=300,
        check=True,
    )
    return [json.loads(line) for line in done.stderr.splitlines() if line.startswith('{"step"')]


def _profiled(script: Path, out: Path, *options: str) -> Path:
    """Run ``script`` under ``xlaprof run OPTIONS``; its run directory."""
    done = cli("run", "-q", *options, "--out", str(out), "--", sys.executable, str(script))
    assert done.returncode == 0, done.stderr[-2000:]
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run


@pytest.fixture(scope="module")
def late_fallback_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    tmp_path = tmp_path_factory.mktemp("late_fallback")
    script = _script(tmp_path)
    bare = _bare(script)
    # 100 ticks a second: enough to place 150 ms of CPU on its step within a tick or two
    return _profiled(script, tmp_path / "run", "--sample-hz", "100"), bare


def test_a_fallback_first_seen_mid_run_is_counted_at_its_step(
    late_fallback_run: tuple[Path, list[dict]],
) -> None:
    run, bare = late_fallback_run
    # GIVEN the bare runtime's own per-step counter deltas (no xlaprof in that process)
    expected = {row["step"]: row["aten"] for row in bare}
    assert expected[5] == {"aten::median": 1} and not any(expected[s] for s in expected if s != 5)
    # THEN xlaprof recorded the same deltas per step, though it reads the counters only when
    # the fallback tracker's log grew
    rows = {r.step: r.aten for r in load_run(run).step_rows()}
    assert {step: rows[step] for step in expected} == expected


def test_step_rows_built_after_the_boundary_hold_the_runtimes_own_counts(
    late_fallback_run: tuple[Path, list[dict]],
) -> None:
    run, bare = late_fallback_run
    # GIVEN the bare runtime's compiles and traced ops per step (its own metric deltas)
    expected = {row["step"]: (row["compiles"], row["ops"]) for row in bare}
    # (compiles while the graph settles and at the fallback's step, none at the last steps)
    compiled = [step for step, (compiles, _) in expected.items() if compiles]
    assert compiled[0] == 0 and 5 in compiled and compiled[-1] < 8
    assert all(ops > 0 for _, ops in expected.values())
    # THEN the rows, built from the boundaries' raw readings at flush time, hold the same
    # (step 0 also holds the ops before the bare script's first read: the tensor's creation)
    rows = {r.step: (r.compiles, r.ops) for r in load_run(run).step_rows()}
    assert {step: rows[step] for step in expected if step} == {
        step: counts for step, counts in expected.items() if step
    }
    assert rows[0][0] == expected[0][0] and rows[0][1] > expected[0][1]


def test_host_samples_land_on_the_steps_that_burned_cpu(
    late_fallback_run: tuple[Path, list[dict]],
) -> None:
    run, bare = late_fallback_run
    burned = {row["step"]: row["burned"] for row in bare}
    samples = load_run(run).host_sample_map()
    line = next(n for n, text in enumerate(SCRIPT.splitlines(), start=1) if "# BURN LINE" in text)
    at_line = {
        step: sum(s for where, s in counts.items() if where.endswith(f"late_fallback.py:{line}"))
        for step, counts in samples.items()
    }
    # each burning step's 150 ms of CPU at that line is charged to its own step (100 Hz ticks:
    # allow a tick or two to fall on a neighbour), and no other step gets a share of it
    for step in (2, 6):
        assert at_line.get(step, 0.0) >= 0.6 * burned[step], (step, at_line)
    others = [s for step, s in at_line.items() if step not in (2, 6)]
    assert sum(others) <= 0.04, at_line


def test_logs_are_opened_at_the_start_only_when_turned_on(tmp_path: Path) -> None:
    script = tmp_path / "two_steps.py"
    script.write_text(
        "import torch, torch_xla\n"
        "x = torch.ones(4, device=torch_xla.device())\n"
        "for _ in range(2):\n    x = x + 1\n    torch_xla.sync()\n"
    )
    for options, debug_log in (((), True), (("--debug-level", "0"), False)):
        run = _profiled(script, tmp_path / f"run{len(options)}", *options)
        # no fallback happened: the tracker's log exists and is empty
        assert (run / "fallbacks.log").read_bytes() == b""
        assert (run / "debug.log").exists() is debug_log
        rows = load_run(run).step_rows()
        assert [r.fallback_offset for r in rows] == [0] * len(rows)
        if debug_log:  # the offsets follow the log torch_xla appended to
            offsets = [r.debug_offset for r in rows]
            assert offsets == sorted(offsets) and offsets[-1] == (run / "debug.log").stat().st_size


def test_sample_hz_zero_records_no_samples(tmp_path: Path) -> None:
    run = _profiled(_script(tmp_path), tmp_path / "off", "--sample-hz", "0")
    assert load_run(run).host_sample_map() == {}
    assert len(load_run(run).step_rows()) == 9  # the steps are still recorded


def test_the_sampler_leaves_the_jobs_random_sequence_alone() -> None:
    import random
    import time

    random.seed(1234)
    expected = [random.random() for _ in range(3)]
    random.seed(1234)
    sampler = HostSampler(1000.0)
    sampler.start()
    time.sleep(0.05)  # ~50 jittered waits
    sampler.stop()
    sampler.thread.join(timeout=5)
    assert [random.random() for _ in range(3)] == expected


def test_the_sampler_keeps_the_step_in_progress() -> None:
    sampler = HostSampler(100.0)
    sampler.seconds.update({(0, "a.py:1"): 0.01, (1, "a.py:1"): 0.02, (1, "<library>"): 0.0})
    taken = sampler.take(keep=1)
    assert taken == {0: {"a.py:1": 0.01}}
    assert sampler.take() == {1: {"a.py:1": 0.02}}  # zero-second entries are dropped
    assert sampler.take() == {}


def test_sample_rows_of_one_step_add_up(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"schema": 1, "steps_recorded": 2}))
    (run / "samples.jsonl").write_text(
        '{"step": 1, "samples": {"a.py:3": 0.25}}\n'
        '{"step": 1, "samples": {"a.py:3": 0.5, "a.py:4": 0.1}}\n'
    )
    assert load_run(run).host_sample_map() == {1: {"a.py:3": 0.75, "a.py:4": 0.1}}


LAST_STEP_STILL_RUNNING = r"""
import sys
import torch, torch_xla
import torch_xla.debug.metrics as met

x = torch.randn(768, 768, device=torch_xla.device())
for _ in range(3):
    for _ in range(24):
        x = torch.tanh(x @ x)  # a slow graph: the last one still runs when the loop ends
    torch_xla.sync()
if "--bare" in sys.argv:
    import torch_xla.core.xla_model as xm

    xm.wait_device_ops()
    print("finished", met.metric_data("ExecuteTime")[0], file=sys.stderr)
"""


def test_the_final_report_counts_the_graph_still_executing_at_exit(tmp_path: Path) -> None:
    script = tmp_path / "exits_while_executing.py"
    script.write_text(LAST_STEP_STILL_RUNNING)
    # GIVEN the bare runtime's count of executions once the device has finished
    done = subprocess.run(
        [sys.executable, str(script), "--bare"],
        capture_output=True,
        text=True,
        env={**os.environ, "PJRT_DEVICE": "CPU"},
        timeout=300,
        check=True,
    )
    (finished,) = [int(line.split()[1]) for line in done.stderr.splitlines() if "finished" in line]
    assert finished == 3
    # WHEN the script exits right after its last sync under xlaprof
    run = _profiled(script, tmp_path / "run")
    # THEN the final report holds every execution, not those done by the time of exit
    (final,) = parse_metrics_report((run / METRICS_DIR / FINAL_METRICS).read_text()).reports
    assert final.metrics["ExecuteTime"].total_samples == finished


SPLIT_SCRIPT = r"""
import json, time
import torch, torch_xla

BURN_STEPS = {3, 5}
x = torch.randn(64, device=torch_xla.device())
rows = []
after = time.thread_time()
for step in range(8):
    for _ in range(50):
        x = x * 0.5 + 1.0
    if step in BURN_STEPS:
        start = time.thread_time()
        while time.thread_time() - start < 0.05:
            pass
    before = time.thread_time()
    torch_xla.sync()
    now = time.thread_time()
    rows.append({"step": step, "before_sync": before - after, "in_sync": now - before})
    after = now
with open(__file__ + ".jsonl", "w") as out:  # beside the script: the test reads it back
    out.writelines(json.dumps(row) + "\n" for row in rows)
"""


def test_a_steps_host_cpu_splits_at_the_sync_that_ended_it(tmp_path: Path) -> None:
    # GIVEN a script that reads its own thread's CPU clock right before and after each sync
    script = tmp_path / "split.py"
    script.write_text(SPLIT_SCRIPT)
    run = _profiled(script, tmp_path / "run")
    lines = Path(f"{script}.jsonl").read_text().splitlines()
    own = {row["step"]: row for row in map(json.loads, lines)}
    rows = {r.step: r for r in load_run(run).step_rows()}
    assert sorted(rows) == sorted(own) == list(range(8))
    for step, mine in own.items():
        row = rows[step]
        assert row.host_cpu_s is not None and row.sync_cpu_s is not None
        before = row.host_cpu_s - row.sync_cpu_s
        # THEN the CPU before the sync is the script's own reading of the same interval, give or
        # take the few calls between the script's clock reads and the hook's (steps 1+: the
        # first step's clock also ran through xlaprof's start)
        if step:
            assert mine["before_sync"] <= before <= mine["before_sync"] + 1e-3, (step, mine, row)
        # and the sync's part is inside what the script saw the call take (which also holds
        # the step boundary)
        assert 0.0 <= row.sync_cpu_s <= mine["in_sync"], (step, mine, row)
    # the burning steps' 50 ms land before the sync, not in it
    for step in (3, 5):
        assert rows[step].host_cpu_s - rows[step].sync_cpu_s >= 0.05
        assert rows[step].sync_cpu_s < 0.05
    # AND the metrics timeline shows the split on the steps that did not compile
    from xlaprof.tables.timeline import step_timeline

    timeline = step_timeline(list(rows.values())).set_index("step")
    for step, row in rows.items():
        if row.compiles:
            assert timeline.loc[step, ["python_tracing_s", "graph_build_s"]].isna().all()
        else:
            assert timeline.loc[step, "graph_build_s"] == pytest.approx(row.sync_cpu_s)
            assert timeline.loc[step, "python_tracing_s"] == pytest.approx(
                row.host_cpu_s - row.sync_cpu_s
            )
