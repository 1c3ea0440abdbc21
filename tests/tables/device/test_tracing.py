"""Host against device per step (``xlaprof.tables.device.tracing``): lazy tracing where the
capture has torch_xla's runtime events, the device's idle time where it has not.

Expected values come from the input: interval unions computed here in plain Python from the
events, XProf's ``input_pipeline_analyzer`` conclusion on the JAX capture, the events written
into a capture built here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from builders import tpu_like_xspace
from decode import clipped_union_ns
from helpers import sample_run

from xlaprof.inputs.traces import load_trace
from xlaprof.tables.device.tracing import HOST_RUNTIME_EVENTS


def test_tracing_bound_is_answered_from_the_trace() -> None:
    # GIVEN the CPU capture of a loop of tiny ops (host and "device" in one capture: on the
    # CPU PJRT device, the XLA ops run on the host's executor threads)
    trace = load_trace(sample_run("tracing_bound_tiny_ops"))
    table = trace.tracing_vs_device()
    events = trace.events
    assert len(table) == len(trace.step_bounds) == 2
    on_line = events[events["line"] == "python"]
    names = on_line["name"].astype(str)

    def spans(*parts: str) -> list[tuple[int, int]]:  # events whose name holds one of parts
        chosen = on_line[names.map(lambda n: any(p in n for p in parts))]
        return list(zip(chosen["start_ns"], chosen["end_ns"], strict=True))

    runtime = spans(*HOST_RUNTIME_EVENTS)
    work = spans("SyncTensorsGraphInternal", "TransferToDevice", "ExecuteComputation")
    # the sync's barrier waits (behind a full queue of executions): no host work
    waits = spans(
        "WaitDeviceOps",
        "TransferFromDevice",
        "XLAGraphExecutor::Compile",
        "TensorCollectionBarrier",
    )
    # the CPU client's "device": its XLA ops and its executions (the thunk executor's spans)
    host_plane = events["plane_kind"] == "host"
    executing = events["name"].astype(str).str.startswith("ThunkExecutor::Execute")
    ops = events[(events["hlo_op"].notna() | executing) & host_plane]
    for row, bound in zip(table.itertuples(), trace.step_bounds.itertuples(), strict=True):
        a, b = int(bound.start_ns), int(bound.end_ns)
        assert row.tracing_s == pytest.approx(((b - a) - clipped_union_ns(runtime, a, b)) / 1e9)
        # the host work the trace measured: the runtime's work on the thread, waits left out
        measured = clipped_union_ns(work + waits, a, b) - clipped_union_ns(waits, a, b)
        assert row.host_busy_s == pytest.approx(measured / 1e9)
        executed = list(zip(ops["start_ns"], ops["end_ns"], strict=True))
        assert row.device_busy_s == pytest.approx(clipped_union_ns(executed, a, b) / 1e9)
        assert row.host_busy_s > 10 * row.device_busy_s  # building the graph alone outlasts it
        assert row.tracing_bound  # tracing takes far longer than the device's work
    # the run's metrics-based analyzer says the same of this run
    from xlaprof.api import analyze

    assert "tracing_bound" in {f.kind.value for f in analyze(sample_run("tracing_bound_tiny_ops"))}


def test_tracing_vs_device_with_device_planes(tmp_path: Path) -> None:
    path = tmp_path / "tpu-vm-0.xplane.pb"
    tpu_like_xspace(path)
    table = load_trace(path).tracing_vs_device().set_index("step")
    # host step 1 runs from the first StepMarker's end (10 ms) to the second's (20 ms); the
    # TPU runs one 1 ms op in it; the host line has no event in between: 10 ms of wall time
    # the runtime's events do not cover (``tracing_s``, a remainder) and no host work measured
    assert table.loc[1, "host_wall_s"] == pytest.approx(0.010)
    assert table.loc[1, "device_busy_s"] == pytest.approx(0.001)
    assert table.loc[1, "tracing_s"] == pytest.approx(0.010)
    assert table.loc[1, "host_busy_s"] == 0.0
    # so the step is not called tracing-bound: a remainder is never a cause
    assert not table.loc[1, "tracing_bound"]


def test_host_bound_verdict_agrees_with_xprofs_input_bound_conclusion(
    input_pipeline: dict[int, dict[str, Any]], jax_trace: Any, gpu_facts: dict[str, Any]
) -> None:
    # XProf: "POTENTIALLY input-bound because 98.1% of the total step time sampled is spent on
    # 'All Others' time (which could be due to I/O or Python execution or both)"
    conclusion = input_pipeline[-1]["input_conclusion"]
    assert "input-bound" in conclusion
    theirs = float(re.search(r"([\d.]+)% of the total step time", conclusion).group(1))
    # xlaprof over the same steps: the share of step time the device idles. The windows differ
    # by the grouping above (a few % of each step), each holding the same ~176 us of device
    # work: the shares differ by far less than XProf's 0.1% rounding.
    table = jax_trace.tracing_vs_device().set_index("step")
    same = table.loc[1:10]
    mine = 100 * same["device_idle_s"].sum() / same["host_wall_s"].sum()
    assert abs(mine - theirs) <= 0.1
    # every step after the first is bound by the host, and none is called tracing: JAX has no
    # lazy tracing; the first spent 2.85 s of its 2.92 s in XLA's compile calls (PJRT_Client_
    # Compile), so it is bound by compiling (one step model: tables/story.py)
    assert set(table.loc[1:, "bound"]) == {"host"}
    assert table.loc[0, "bound"] == "compile"
    assert not table["lazy_tensor"].any()
    assert table["tracing_s"].isna().all() and table["tracing_bound"].isna().all()
    # the step the host slept in idles the device at least the 30 ms it slept, more than the
    # median step
    facts = gpu_facts["jax"]
    extra = table.loc[facts["slow_host_step"], "device_idle_s"] - same["device_idle_s"].median()
    assert extra >= facts["slow_host_extra_s"]


def test_kineto_steps_are_host_bound_not_tracing(torch_trace: Any) -> None:
    # PyTorch eager: no lazy-tensor runtime, so no tracing; the GPU idles most of each step
    # while the host launches the next kernels (busy ~0.33 ms of ~1.8 ms)
    table = torch_trace.tracing_vs_device()
    assert list(table["step"]) == list(range(3, 9))
    assert not table["lazy_tensor"].any() and table["tracing_s"].isna().all()
    assert set(table["bound"]) == {"host"}
    assert (table["device_idle_s"] > table["device_busy_s"]).all()


def test_the_host_table_and_the_device_steps_agree_on_busy(jax_trace: Any) -> None:
    # one interval union, two callers: the tables a user reads side by side agree
    steps = jax_trace.device_steps().set_index("step")["busy_s"]
    table = jax_trace.tracing_vs_device().set_index("step")["device_busy_s"]
    assert np.allclose(steps.sort_index().to_numpy(), table.sort_index().to_numpy())
