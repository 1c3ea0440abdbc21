"""Each execution attributed to the step that launched it (``xlaprof.rundir.executions``), and
the steps' times in the run: worked examples whose answers are written out by hand from the
timelines below, and properties over any rows a sent ``executions.jsonl`` can hold.

Times are seconds from 100.0 (Unix-like); each step row is (start, host wall, graphs built).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xlaprof.rundir.executions import attribute, device_windows
from xlaprof.rundir.reader import load_run
from xlaprof.rundir.schema import ExecutionRow, StepRow

T0 = 100.0


def _rows(*steps: tuple[float, float, int | None]) -> list[StepRow]:
    return [
        StepRow(step=index, start=T0 + start, wall_s=wall, graphs=graphs)
        for index, (start, wall, graphs) in enumerate(steps)
    ]


def _runs(*pairs: tuple[float, float]) -> list[ExecutionRow]:
    return [ExecutionRow(launch=T0 + a, completion=T0 + b) for a, b in pairs]


def test_a_host_that_runs_ahead_pays_each_step_its_device_time() -> None:
    # GIVEN four 1 ms host steps, each launching one graph at its end, on a device that needs
    # 10 ms a graph: graph k runs 10k+1 .. 10k+11 ms, queued behind the ones before
    rows = _rows((0.000, 0.001, 1), (0.001, 0.001, 1), (0.002, 0.001, 1), (0.003, 0.001, 1))
    runs = _runs((0.001, 0.011), (0.002, 0.021), (0.003, 0.031), (0.004, 0.041))
    device = attribute(rows, runs)
    assert device is not None
    # THEN each step took its device time (the first also its host millisecond), not 1 ms
    assert [round(s.time_s, 6) for s in device.steps] == [0.011, 0.010, 0.010, 0.010]
    assert [round(s.device_s, 6) for s in device.steps] == [0.010] * 4
    # AND the queue and run-ahead are what the timeline says: graph k waited 9k ms behind the
    # k graphs before it, none of which had completed when it was launched
    assert [round(s.queue_s, 6) for s in device.steps] == [0.0, 0.009, 0.018, 0.027]
    assert [s.ahead_steps for s in device.steps] == [0, 1, 2, 3]
    assert device.max_ahead == 3
    # AND the drain is the 37 ms from the last sync (4 ms) to the last completion (41 ms), and
    # the steps' times add up to the run's 41 ms
    assert device.drain_s == pytest.approx(0.037)
    assert sum(s.time_s for s in device.steps) == pytest.approx(0.041)


def test_a_device_that_waits_for_the_host_gives_the_host_its_time() -> None:
    # GIVEN 10 ms host steps launching a graph the device runs in 1 ms
    rows = _rows((0.00, 0.01, 1), (0.01, 0.01, 1), (0.02, 0.01, 1))
    runs = _runs((0.0100, 0.0110), (0.0200, 0.0210), (0.0300, 0.0310))
    device = attribute(rows, runs)
    assert device is not None
    # THEN each step took the host's 10 ms, the last one's millisecond of device work on top
    assert [round(s.time_s, 6) for s in device.steps] == [0.011, 0.010, 0.010]
    assert [round(s.device_s, 6) for s in device.steps] == [0.001] * 3
    assert [s.ahead_steps for s in device.steps] == [0, 0, 0]


def test_a_launch_that_lands_in_the_next_step_is_its_syncs() -> None:
    # GIVEN a step whose sync's launch came from the thread pool after the next step began
    rows = _rows((0.00, 0.01, 1), (0.01, 0.01, 1))
    runs = _runs((0.0102, 0.015), (0.0201, 0.025))
    device = attribute(rows, runs)
    assert device is not None
    # THEN it is the first step's (it built a graph not yet launched), the other the second's
    assert [s.executions for s in device.steps] == [1, 1]


def test_a_launch_several_steps_late_is_still_its_syncs() -> None:
    # GIVEN 0.1 ms host steps whose launches each come 0.25 ms after their sync (the runtime's
    # thread pool waiting for a CPU the device's work holds): each lands two windows later
    rows = _rows(*[(0.0001 * k, 0.0001, 1) for k in range(6)])
    runs = _runs(*[(0.0001 * (k + 1) + 0.00025, 0.01 * (k + 1)) for k in range(6)])
    device = attribute(rows, runs)
    assert device is not None
    # THEN every step has its own one execution, in order, and its device time
    assert [s.executions for s in device.steps] == [1] * 6
    assert [round(s.device_s, 6) for s in device.steps[1:]] == [0.01] * 5


def test_a_graph_the_run_never_timed_does_not_pull_later_launches_back() -> None:
    # GIVEN a first step that built two graphs of which only one was ever timed, then steps
    # whose launches land in their own windows
    rows = _rows((0.00, 0.01, 2), (0.01, 0.01, 1), (0.02, 0.01, 1), (0.03, 0.01, 1))
    runs = _runs((0.005, 0.006), (0.015, 0.016), (0.025, 0.026), (0.035, 0.036))
    device = attribute(rows, runs)
    assert device is not None
    # THEN (fewer launches than graphs) the order is not trusted: each launch goes back at
    # most to the step before its own, so the step owed a launch takes one more, not all
    assert [s.executions for s in device.steps] == [2, 1, 1, 0]


def test_a_read_after_the_loop_belongs_to_no_step() -> None:
    # GIVEN a last step that launched its one graph, then a read after the loop
    rows = _rows(
        (0.00, 0.01, 1),
    )
    runs = _runs((0.0100, 0.0110), (0.0500, 0.0510))
    device = attribute(rows, runs)
    assert device is not None
    assert device.steps[0].executions == 1 and device.outside == 1


def test_a_step_whose_graph_never_completed_has_no_time() -> None:
    # GIVEN a run ended without its drain: the second step's graph was never seen completing
    rows = _rows((0.00, 0.01, 1), (0.01, 0.01, 1))
    device = attribute(rows, _runs((0.0100, 0.0110)))
    assert device is not None
    # THEN its device time and time in the run are not measured (never 0.0)
    assert device.steps[1].device_s is None and device.steps[1].time_s is None
    assert device.steps[0].time_s is not None


def _ahead_of_the_device(lost: int, before: float | None) -> list[ExecutionRow]:
    """Six 1 ms host steps each launching one graph at its end on a device that needs 10 ms a
    graph (graph k runs 10k+1 .. 10k+11 ms), with graph ``lost``'s sample dropped by the
    runtime's window: a ``missed`` row naming the completion it came before (or none)."""
    runs = _runs(*[(0.001 * (k + 1), 0.010 * (k + 1) + 0.001) for k in range(6)])
    del runs[lost]
    return [*runs, ExecutionRow(missed=1, before=before)]


def test_a_lost_execution_keeps_its_place_and_only_its_steps_go_unmeasured() -> None:
    # GIVEN a host running ahead whose third graph's sample was lost before it completed,
    # right before the fourth's completion (41 ms)
    rows = _rows(*[(0.001 * k, 0.001, 1) for k in range(6)])
    device = attribute(rows, _ahead_of_the_device(2, T0 + 0.041))
    assert device is not None
    # THEN every later launch is still its own step's, and the lost one is counted
    assert [s.executions for s in device.steps] == [1, 1, 0, 1, 1, 1]
    assert device.lost == 1 and device.outside == 0
    # AND the third step (its graph's times lost) and the fourth (its graph began on the
    # device when the lost one completed: not known) have no time; the rest keep theirs
    times = [None if s.time_s is None else round(s.time_s, 6) for s in device.steps]
    assert times == [0.011, 0.010, None, None, 0.010, 0.010]
    assert device.steps[3].device_s is None and device.steps[4].device_s == pytest.approx(0.010)
    assert device.steps[3].begin_s is None  # when it began on the device is not known either
    # AND the drain from the last sync (6 ms) to the last completion (61 ms) is measured
    assert device.drain_s == pytest.approx(0.055)
    # AND the lost graph still held its place in the queue: no graph had completed by the
    # 6th ms, so step k was k steps ahead, the lost one counted among the earlier ones (its
    # own launch is not known: no count of its own)
    assert [s.ahead_steps for s in device.steps] == [0, 1, None, 3, 4, 5]
    assert device.max_ahead == 5


def test_a_lost_execution_not_placed_is_only_counted() -> None:
    # GIVEN the same run from a recorder that did not say where the lost one was
    rows = _rows(*[(0.001 * k, 0.001, 1) for k in range(6)])
    device = attribute(rows, _ahead_of_the_device(2, None))
    assert device is not None
    # THEN it is counted, and each step that kept its execution keeps it (no launch is given
    # to a step it does not belong to: with fewer launches than graphs, at most one step back)
    assert device.lost == 1
    assert sum(s.executions for s in device.steps) == 5


def test_a_run_without_executions_is_not_attributed() -> None:
    assert attribute(_rows((0.0, 0.01, 1)), None) is None


def test_device_windows_are_each_steps_place_in_the_run() -> None:
    rows = _rows((0.000, 0.001, 1), (0.001, 0.001, 1))
    device = attribute(rows, _runs((0.001, 0.011), (0.002, 0.021)))
    assert device is not None
    windows = device_windows(device)
    # step 0 from its start to its graph's completion, step 1 from there to its own
    assert windows == [
        (0, round(T0 * 1e9), round((T0 + 0.011) * 1e9)),
        (1, round((T0 + 0.011) * 1e9), round((T0 + 0.021) * 1e9)),
    ]


_times = st.floats(allow_nan=True, allow_infinity=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(st.floats(0, 10), st.floats(0, 1), st.one_of(st.none(), st.integers(0, 3))),
        min_size=1,
        max_size=20,
    ),
    pairs=st.lists(st.tuples(st.floats(-1, 12), st.floats(0, 5)), max_size=40),
    lost=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 45)), max_size=3),
)
def test_any_rows_give_sane_steps(steps, pairs, lost) -> None:
    # rows as a run could hold them (starts in order), executions anywhere, and lost ones said
    # to come before any of them (or before a completion no execution has)
    ordered = sorted(steps, key=lambda s: s[0])
    rows = _rows(*ordered)
    runs = [ExecutionRow(launch=T0 + a, completion=T0 + a + d) for a, d in pairs]
    completions = [run.completion for run in runs] + [T0 - 5.0] * 6
    missed = [ExecutionRow(missed=n, before=completions[k % len(completions)]) for n, k in lost]
    device = attribute(rows, runs + missed)
    assert device is not None and len(device.steps) == len(rows)
    assert device.lost == sum(n for n, _ in lost)
    assert sum(s.executions for s in device.steps) + device.outside == len(runs)
    for step in device.steps:
        for value in (step.time_s, step.device_s, step.queue_s):
            assert value is None or (math.isfinite(value) and value >= 0)
        assert step.ahead_steps is None or step.ahead_steps >= 0


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(
        st.one_of(
            st.dictionaries(
                st.sampled_from(["launch", "completion", "missed", "before", "x"]),
                st.one_of(_times, st.integers(-(10**30), 10**30), st.text(max_size=5), st.none()),
                max_size=4,
            ),
            st.text(max_size=20),
        ),
        max_size=12,
    )
)
def test_a_sent_executions_file_is_read_or_skipped(tmp_path: Path, lines) -> None:
    # GIVEN a run directory whose executions.jsonl holds anything at all
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "run.json").write_text(json.dumps({"schema": 1, "steps_recorded": 1}))
    (run / "steps.jsonl").write_text(json.dumps({"step": 0, "start": T0, "wall_s": 0.01}) + "\n")
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    (run / "executions.jsonl").write_text(text + "\n")
    # WHEN it is read
    rows = load_run(run).execution_rows()
    # THEN every row kept has finite times, launch first, or a positive count of lost ones
    assert rows is not None
    for row in rows:
        if row.missed:
            assert row.launch is None and row.completion is None and row.missed > 0
        else:
            assert row.launch is not None and row.completion is not None
            assert math.isfinite(row.launch) and row.launch <= row.completion
