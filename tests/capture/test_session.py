"""The profiling session's step boundary (``xlaprof.capture.session``), on the real runtime.

Its cheap paths keep every per-step figure it recorded before: it reads the ``aten::``
counters only when the fallback log grew, leaves the host sampler to charge the step in
progress itself and reads log sizes from files it opened at the start. And a boundary that
fails stops profiling, never the job. Expected values come from the bare runtime (the same
script run without xlaprof prints its own counter deltas per step) and from the script's clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, profiled_run

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


@pytest.fixture(scope="module")
def late_fallback_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    tmp_path = tmp_path_factory.mktemp("late_fallback")
    script = _script(tmp_path)
    bare = _bare(script)
    # 100 ticks a second: enough to place 150 ms of CPU on its step within a tick or two
    return profiled_run(script, tmp_path / "run", "--sample-hz", "100"), bare


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


def test_logs_are_opened_at_the_start_when_turned_on(
    late_fallback_run: tuple[Path, list[dict]],
) -> None:
    # GIVEN the late-fallback loop run with the debug log on (the default): no fallback before
    # step 5, one at it
    run, _ = late_fallback_run
    rows = load_run(run).step_rows()
    # THEN the fallback tracker's log was open from the start: empty at every step before the
    # fallback, and from it on at its whole size (what torch_xla appended at step 5)
    fallbacks = [r.fallback_offset for r in rows]
    size = (run / "fallbacks.log").stat().st_size
    assert size > 0 and fallbacks == [0] * 5 + [size] * 4
    # AND the debug log's offsets follow the log torch_xla appended to, step by step
    offsets = [r.debug_offset for r in rows]
    assert offsets == sorted(offsets) and offsets[-1] == (run / "debug.log").stat().st_size


def test_debug_level_and_sample_hz_zero_turn_their_files_off(tmp_path: Path) -> None:
    # GIVEN the late-fallback loop (a fallback at step 5, 150 ms of CPU burned at two steps)
    # run with the debug log and the host sampler off
    options = ("--debug-level", "0", "--sample-hz", "0")
    run = profiled_run(_script(tmp_path), tmp_path / "off", *options)
    # THEN there is no debug log and no host sample, while the fallback tracker's log is
    # still opened and holds the fallback, and every step is recorded
    assert not (run / "debug.log").exists()
    assert load_run(run).host_sample_map() == {}
    assert b"median" in (run / "fallbacks.log").read_bytes()
    assert len(load_run(run).step_rows()) == 9


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
    run = profiled_run(script, tmp_path / "run")
    # THEN the final report holds every execution, not those done by the time of exit
    (final,) = parse_metrics_report((run / METRICS_DIR / FINAL_METRICS).read_text()).reports
    assert final.metrics["ExecuteTime"].total_samples == finished


BROKEN = r"""
import sys, torch, torch_xla, xlaprof
out = sys.argv[1]
with xlaprof.profile(out=out, debug_level=0, graphs=False) as session:
    x = torch.zeros(4, device=torch_xla.device())
    for step in range(6):
        x = x + 1
        if step == 3:  # the runtime's metric reads start failing under the session
            session.metrics.metric = lambda name: int("not a metric")
        torch_xla.sync()
print("script finished", float(x.sum()))
"""


def test_a_failing_boundary_stops_profiling_not_the_job(tmp_path: Path) -> None:
    # GIVEN a profiled loop whose metric reads fail from its fourth step on
    script = tmp_path / "broken.py"
    script.write_text(BROKEN)
    out = tmp_path / "runs"
    # WHEN it runs
    done = subprocess.run(
        [sys.executable, str(script), str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(REPO)},
    )
    # THEN the script ran to its end, and the run says where and why profiling stopped
    assert done.returncode == 0, done.stderr[-2000:]
    assert "script finished 24.0" in done.stdout
    (info_path,) = out.glob("*/run.json")
    info = json.loads(info_path.read_text())
    assert info["status"] == "ok" and info["steps_recorded"] == 3
    assert any(
        w.startswith("profiling stopped at step 3: a step boundary failed (ValueError")
        for w in info["warnings"]
    )
