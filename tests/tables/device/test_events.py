"""Which events of a capture are device compute, and of what category
(``xlaprof.tables.device.events``).

Expected values come from this suite's independent decode of the H100 JAX capture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from decode import Decoded
from helpers import (
    MI300,
    SAMPLE_RUNS,
    SHARED_XPLANES,
    TPU,
    jax_cpu_sample,
    sample_capture,
    shared_trace,
)

from xlaprof.parse.xplane import schema as xplane
from xlaprof.parse.xplane import xspace_frame
from xlaprof.tables import device as device_model


def test_autotuning_kernels_are_the_gpu_work_inside_the_compile_calls(
    jax_trace: Any, jax_xspace: Decoded
) -> None:
    # GIVEN the host's PJRT_Client_Compile calls (the PJRT C API's compile) and the GPU events
    # that start inside them: XLA's autotuner timing candidates, redzone checks, delay kernels
    compiles = [(e.start_ns, e.end_ns) for e in jax_xspace.named("PJRT_Client_Compile")]
    assert len(compiles) == 2  # jit_stage and jit_train_step, both in step 0
    inside = [
        e for e in jax_xspace.on("/device:GPU") if any(a <= e.start_ns < b for a, b in compiles)
    ]
    assert len(inside) == 2113
    # THEN exactly those are category autotune, all in step 0
    frame = device_model.device_events(jax_trace.events)
    assert int((frame["category"] == "autotune").sum()) == len(inside)
    steps = jax_trace.device_steps().set_index("step")
    assert steps.loc[0, "autotune_s"] > 0
    assert (steps.loc[1:, "autotune_s"] == 0).all()
    # an op's autotuning runs are a row of their own: the program ran each op once per step
    ops = jax_trace.device_ops()
    program = ops[(ops["category"] != "autotune") & ops["name"].str.startswith("gemm_fusion")]
    assert set(program["occurrences"]) == {len(steps)}


# The real captures: the sample runs' and ../shared/traces' xplanes.
REAL = [
    *(("sample", name) for name in SAMPLE_RUNS),
    *(("shared", name) for name in SHARED_XPLANES),
]


def test_the_device_model_numbers_steps_the_same_without_args(tmp_path: Path) -> None:
    """Steps named by their group_id stat: from the column, with or without args."""
    from xlaprof.tables.device import device_steps

    space = xplane.xspace_class()()
    plane = space.planes.add(id=1, name="/device:GPU:0")
    plane.stat_metadata[1].name = "group_id"
    plane.event_metadata[1].name = "train step"
    plane.event_metadata[2].name = "fusion.1"
    steps = plane.lines.add(id=1, name="Steps", timestamp_ns=1_000)
    kernels = plane.lines.add(id=2, name="Stream #7(Kernel)", timestamp_ns=1_000)
    for index, group in enumerate((41, 42)):
        step = steps.events.add(metadata_id=1, offset_ps=index * 10**9, duration_ps=9 * 10**8)
        step.stats.add(metadata_id=1, int64_value=group)
        kernels.events.add(metadata_id=2, offset_ps=index * 10**9 + 10**6, duration_ps=10**8)
    path = tmp_path / "gpu.xplane.pb"
    path.write_bytes(space.SerializeToString())
    with_args = device_steps(xspace_frame(path))
    assert with_args["step"].tolist() == [41, 42]
    pd.testing.assert_frame_equal(device_steps(xspace_frame(path, args=False)), with_args)
    old_style = xspace_frame(path).drop(columns="group_id")  # a frame before the column
    pd.testing.assert_frame_equal(device_steps(old_style), with_args)


@pytest.mark.parametrize(("where", "name"), REAL, ids=[f"{w}:{n}" for w, n in REAL])
def test_the_device_model_reads_nothing_from_args_on_real_captures(where: str, name: str) -> None:
    """The pod cache keeps every column but args: its device tables must be the same (what
    the device model reads of args, the framework op, comes as a column of its own)."""
    from xlaprof.tables import device

    path = sample_capture(name) if where == "sample" else shared_trace(name)
    with_args = xspace_frame(path)
    without = xspace_frame(path, args=False, framework_op=True)
    for table in (device.device_steps, device.device_ops, device.device_utilization):
        pd.testing.assert_frame_equal(table(without), table(with_args))


def test_an_op_in_no_session_has_no_self_time_rather_than_garbage() -> None:
    """Self time is found per (session, host, device, line): an op event whose key is missing
    (here its session) belongs to no such group, so its self time is not measured (NaN),
    never whatever memory held; the other ops' self times are unchanged."""
    from xlaprof.tables.device.events import device_events
    from xlaprof.tables.device.steps import with_session

    events = with_session(xspace_frame(shared_trace(SHARED_XPLANES[0])))
    frame = device_events(events)
    ops = frame.index[frame["op_line"].to_numpy()]
    assert len(ops) > 2
    lost = ops[1]
    damaged = events.copy()
    damaged.loc[lost, "session"] = None
    again = device_events(damaged)
    assert bool(again.loc[lost, "op_line"])
    assert pd.isna(again.loc[lost, "self_ns"])
    kept = ops[ops != lost]
    pd.testing.assert_series_equal(again.loc[kept, "self_ns"], frame.loc[kept, "self_ns"])


@pytest.mark.parametrize("name", ["mi300", "tpu", "jax_cpu"])
def test_self_times_are_each_lines_nesting_walk(name: str) -> None:
    """An op's self time is its time less the ops nested in it on its line. On the MI300 and
    TPU captures no op runs inside another on its line; on the JAX CPU capture fusions run
    inside calls. Either way each line's ops, walked on their own by ``intervals.nesting``,
    give the same self times and parents."""
    import numpy as np

    from xlaprof.tables.device.events import device_events
    from xlaprof.tables.device.steps import with_session
    from xlaprof.tables.intervals import nesting

    paths = {"mi300": shared_trace(MI300), "tpu": shared_trace(TPU), "jax_cpu": jax_cpu_sample()}
    frame = device_events(with_session(xspace_frame(paths[name])))
    ops = frame[frame["op_line"].to_numpy()]
    nested = 0
    for _, line in ops.groupby(["session", "host", "device", "line"], observed=True):
        offsets = line["device_offset_ps"].to_numpy()
        times = line["time_ns"].to_numpy()
        if np.isnan(offsets).any():  # the trace's clock, in whole ns
            begin = line["start_ns"].to_numpy()
            own, up = nesting(begin, begin + times.astype(np.int64))
        else:  # the device clock, in whole ps
            begin = offsets.astype(np.int64)
            own, up = nesting(begin, begin + (times * 1000.0).astype(np.int64))
            own = own / 1000.0
        assert line["self_ns"].to_numpy().tolist() == own.tolist()
        parents = [None if u < 0 else line["op"].iloc[u] for u in up.tolist()]
        assert [None if pd.isna(p) else p for p in line["parent_op"]] == parents
        nested += int((up >= 0).sum())
    assert (nested > 0) == (name == "jax_cpu")  # ops nest on one capture only


@pytest.mark.parametrize("name", ["tpu", "jax_cpu"])
def test_self_times_do_not_depend_on_the_order_of_the_rows(name: str) -> None:
    """A capture holds each line's events one after another, and the self-time pass reads
    them in place there; with the rows shuffled (lines interleaved) it sorts them first: the
    times, self times and parents of every op are the same either way."""
    import numpy as np

    from xlaprof.tables.device.events import device_events
    from xlaprof.tables.device.steps import with_session

    paths = {"tpu": shared_trace(TPU), "jax_cpu": jax_cpu_sample()}
    events = with_session(xspace_frame(paths[name]))
    shuffled = events.iloc[np.random.default_rng(7).permutation(len(events))]
    frame = device_events(events)
    again = device_events(shuffled).loc[frame.index]
    assert bool(frame["op_line"].any())
    for column in ("time_ns", "self_ns"):
        assert np.array_equal(frame[column].to_numpy(), again[column].to_numpy(), equal_nan=True)
    assert frame["parent_op"].astype(object).equals(again["parent_op"].astype(object))
