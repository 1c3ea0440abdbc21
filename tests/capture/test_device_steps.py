"""Steps as the device runs them, on the real CPU runtime: a device-bound loop whose host runs
ahead of the device (issue 45).

torch_xla's ``sync()`` returns before the device has run the step's graph; with four 1024x1024
matmuls a step the device needs tens of milliseconds a step while the host needs well under
one, so the host queues steps (torch_xla's CPU client lets about 32 wait before a sync blocks).
The truth comes from the script itself, never from xlaprof: it drains the device
(``wait_device_ops``), times its steps, drains again, and divides (the device's drained
cadence); it reads the runtime's own samples of its executions after the drain (each
``ExecuteTime`` sample's timestamp is a completion, and with the queue never empty one
completion to the next is the device's time for a step: their median is what the device's
median step took, whatever else the machine ran meanwhile); and it counts after each sync how
many of its executions had completed (``metric_data('ExecuteTime')``'s sample count): how far
its host was ahead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from builders import DEVICE_BOUND_STEP
from helpers import cli

from xlaprof.model.result import AnalysisResult
from xlaprof.pipeline import analyze_one
from xlaprof.report import RenderOptions, render
from xlaprof.rundir.reader import load_run

pytestmark = pytest.mark.runtime

SCRIPT = (
    """
import json, statistics, sys, time
import torch, torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met

steps = int(sys.argv[1])
"""
    + DEVICE_BOUND_STEP
    + """

for _ in range(2):  # warm-up: the two compiles
    step()
xm.wait_device_ops()
done = met.metric_data("ExecuteTime")[0]
ahead = []
start = time.perf_counter()
for i in range(steps):
    step()
    # earlier steps whose execution had not completed as this one was launched
    ahead.append(i - (met.metric_data("ExecuteTime")[0] - done))
host = time.perf_counter() - start
xm.wait_device_ops()
drained = time.perf_counter() - start
# the runtime's own record of the loop's executions it still holds: each sample's timestamp is
# its completion; with the queue never empty in the loop, one completion to the next is the
# device's time for a step
kept = sorted(t for t, _ in met.metric_data("ExecuteTime")[2])[-steps:]
busy = [b - a for a, b in zip(kept, kept[1:])]
print("TRUTH " + json.dumps({
    "cadence_s": drained / steps, "host_s": host / steps, "max_ahead": max(ahead),
    "device_median_s": statistics.median(busy), "device_low_s": min(busy),
    "device_high_s": max(busy),
}))
"""
)


def _run(
    tmp_path: Path, steps: int, env: dict[str, str] | None = None
) -> tuple[dict[str, float], Path]:
    """The script under ``xlaprof run`` for ``steps`` steps after its warm-up: its own
    measurements and the run directory."""
    script = tmp_path / "device_bound.py"
    script.write_text(SCRIPT)
    out = tmp_path / f"run{steps}"
    command = ("run", "-q", "--out", str(out), "--", sys.executable, str(script), str(steps))
    result = cli(*command, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("TRUTH ")]
    return json.loads(line.removeprefix("TRUTH ")), out


@pytest.mark.parametrize("steps", [16, 40])
def test_a_device_bound_loop_is_timed_as_the_device_runs_it(tmp_path: Path, steps: int) -> None:
    # GIVEN a loop whose device needs far longer per step than its host (the script measures
    # both, and how far its host ran ahead: 16 steps queue up whole; 40 fill the queue)
    truth, out = _run(tmp_path, steps)
    assert truth["host_s"] < truth["cadence_s"] / 2  # the host ran ahead: its premise
    assert truth["max_ahead"] >= 4
    # WHEN xlaprof analyzes the run
    result, _, _ = analyze_one(out)
    story, timeline = result.story, result.timeline
    assert story is not None and story.median_wall_s is not None
    # THEN the median steady step is the device's time for a step (the runtime's own record of
    # its completions), not when the host's sync returned
    assert story.median_wall_s == pytest.approx(truth["device_median_s"], rel=0.1)
    # AND the host's own work is a small part of it; its wall too while the queue has room
    # (16 steps queue up whole; once 40 fill the queue, each sync waits for a slot, so the
    # host's wall is the device's cadence and only its CPU time tells it was ahead). The
    # wall is judged over the steady steps: the first one's host wall holds the script's
    # drain after its warm-up (its ``wait_device_ops``), and on a busy machine that step can
    # be the one of median device time.
    assert story.host_cpu_s is not None and story.host_cpu_s < story.median_wall_s / 2
    if steps == 16:
        host_walls = timeline[timeline["steady"]]["host_wall_s"]
        assert host_walls.notna().all() and host_walls.median() < story.median_wall_s / 2
    # AND the steady steps are device-bound, as the headline says, with no tracing verdict
    assert story.bound == "device"
    assert story.bound_steps.get("device", 0) >= story.steady_steps - 1
    assert "tracing_bound" not in {f.kind.value for f in result.findings}
    # AND the story names how far the host ran ahead (the script's own count, one either way:
    # the script reads its count a moment after each sync, the session at the sync)
    assert story.ahead_max is not None
    assert abs(story.ahead_max - truth["max_ahead"]) <= 1
    # AND the run's time holds the drain: the steps' times add up to the run, so the
    # steady steps hold at least the device's time for them
    steady = timeline[timeline["steady"]]
    assert steady["wall_s"].sum() >= 0.75 * truth["cadence_s"] * (len(steady) - 1)
    assert story.drain_s is not None and story.drain_s > truth["cadence_s"]
    # AND every step is timed: the script's own drain of a full queue (its wait_device_ops)
    # completes ~33 executions between two of the session's reads, which torch_xla's window
    # of samples under ``xlaprof run`` holds
    assert story.lost_executions == 0 and story.untimed_steps == 0
    # AND each step's wait for a CPU is measured (Linux's run-queue wait of the stepping
    # thread), within the host's own time for the step
    waits = timeline["cpu_wait_s"].to_numpy(dtype=float)
    assert (waits >= 0).all()
    assert (waits <= timeline["host_wall_s"].to_numpy(dtype=float) + 1e-6).all()
    # AND the host's wall splits without counting a moment twice: its CPU time, its wait for
    # a CPU and the time its sync was blocked (the sync's own wait for a CPU is not blocked
    # time: on the CPU runtime the device's threads hold the cores while the host waits)
    rows = [r for r in load_run(next(out.glob("*"))).step_rows() if r.step >= 2 and r.sync_wall_s]
    assert rows and all(r.sync_cpu_wait_s is not None for r in rows)
    for r in rows:
        assert r.sync_cpu_wait_s is not None and r.sync_cpu_s is not None
        assert r.sync_cpu_wait_s <= r.sync_wall_s + 1e-9
        blocked = max(r.sync_wall_s - r.sync_cpu_s - r.sync_cpu_wait_s, 0.0)
        split = r.host_cpu_s + (r.cpu_wait_s or 0.0) + blocked
        # a wait is counted when it ends, so one can straddle the boundary: a little slack
        assert split <= r.wall_s * 1.05 + 0.002, (r.step, split, r.wall_s)


def test_executions_whose_samples_were_lost_leave_only_their_steps_untimed(tmp_path: Path) -> None:
    # GIVEN the device-bound loop run with torch_xla keeping 8 samples a metric: the script's
    # drain completes its 16 queued steps between two reads, so most of their samples are gone
    truth, out = _run(tmp_path, 16, env={"XLA_METRICS_SAMPLES": "8"})
    rows = load_run(next(out.glob("*"))).execution_rows()
    assert rows is not None
    completions = {r.completion for r in rows if not r.missed}
    lost = [r for r in rows if r.missed]
    # (the premise: the session recorded the loss, and which execution the lost ones preceded)
    assert lost and all(r.before in completions for r in lost)
    dropped = sum(r.missed for r in lost)
    # (18 steps of one graph each, every one run: the timed and the lost ones are all of them)
    assert len(completions) + dropped == 18
    # WHEN xlaprof analyzes the run
    result, _, _ = analyze_one(out)
    story = result.story
    assert story is not None
    # THEN it says how many were lost, and leaves out of the median the steps they and the
    # execution right after each gap belonged to (when it began on the device is not known)
    assert story.lost_executions == dropped
    assert dropped <= (story.untimed_steps or 0) <= dropped + len(lost)
    # AND the steps still timed give the device's cadence and a device-bound verdict: the
    # untimed steps' host walls (the host ran ahead) are never read as their times
    assert story.steady_steps >= 16 - story.untimed_steps - 1
    # (the steps still timed are those whose completions the runtime's window still held when
    # the script read it after its drain: the median of those is the script's own median)
    assert story.median_wall_s == pytest.approx(truth["device_median_s"], rel=0.1)
    assert story.bound == "device"
    assert "tracing_bound" not in {f.kind.value for f in result.findings}
    steady = result.timeline[result.timeline["steady"]]
    assert steady["wall_s"].isna().sum() == story.untimed_steps
    # AND how far the host ran ahead is the fewest the kept samples allow (the lost ones
    # hold their places in the queue), never more than the script's own count (one either
    # way, as above), and the console says it is a lower bound
    assert story.ahead_max is not None and story.ahead_max <= truth["max_ahead"] + 1
    text = render(AnalysisResult([result]), "console", options=RenderOptions(width=200))
    assert f"The host was at least {story.ahead_max} steps ahead of the device" in text
