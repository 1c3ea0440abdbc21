"""Per-op tables of a capture's devices (``xlaprof.tables.device.ops``), against XProf.

Expected values come from XProf's own converters run on the same file (``hlo_stats``, the
``conftest.xprof`` fixture) and from the capture's event metadata.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from decode import close, decode_xspace, rows, xprof_tool
from helpers import FUSED_ATTN, GPU_JAX, MI300, SHARED_XPLANES, TPU, gpu_sample, shared_trace

from xlaprof.inputs.traces import load_trace
from xlaprof.tables import device as device_model


def test_tpu_ops_are_read_from_the_event_metadata(traces: dict[str, Any]) -> None:
    # GIVEN the TPU v6e capture, where the op is the event name and its category, program and
    # FLOPs are stats of the event *metadata*
    trace = traces[TPU]
    ops = trace.device_ops()
    # THEN the XLA Ops line's ops are there on every chip, with category and program id
    assert set(ops["device"]) == {"TPU:0", "TPU:1", "TPU:2", "TPU:3"}
    fusion = ops[(ops["name"] == "broadcast_add_fusion") & (ops["device"] == "TPU:0")].iloc[0]
    assert fusion["hlo_category"] == "loop fusion" and fusion["category"] == "fusion"
    assert fusion["program_id"] == "12190760917235803885"
    assert fusion["occurrences"] == 100
    # flops per occurrence (metadata stat) x occurrences
    per_op = trace.events[trace.events["hlo_op"] == "broadcast_add_fusion"]["flops"].iloc[0]
    assert fusion["flops"] == pytest.approx(per_op * 100)
    # the device's peaks are known (plane stats), so the op has a side of the roofline
    assert trace.devices.set_index("device").loc["TPU:0", "peak_flops_per_s"] == 918e12
    assert fusion["bound"] == "memory"  # 0.125 FLOP/byte, far below the ridge point
    # copies to and from host memory (S(5)) are host-offload transfers, not device copies
    done = ops[ops["name"] == "copy-done.4"].iloc[0]
    assert done["category"] == "host_offload"
    # the async line's in-flight spans are not ops
    assert not ops["name"].isin(["async-copy"]).any()
    # ops run one at a time on a chip: each step's busy time is split exactly by category
    steps = trace.device_steps()
    categories = [f"{name}_s" for name in device_model.CATEGORIES]
    assert ((steps[categories].sum(axis=1) - steps["busy_s"]).abs() < 1e-6).all()


def test_a_dones_rate_over_devices_is_there_only_where_every_devices_pairs_are(
    traces: dict[str, Any],
) -> None:
    """Summed over devices, a done's bytes are every device's: its rate over the pairs' spans
    only where every device's pairs were matched. The v6e capture has an Async XLA Ops line
    on TPU:0 alone (decoded independently: no other plane has one), so over its four chips the
    dones have no rate, where the spans of TPU:0's pairs over four chips' bytes made one four
    times TPU:0's; over TPU:0 alone, the sum's rate is TPU:0's own."""
    decoded = decode_xspace(shared_trace(TPU))
    with_line = {e.plane for e in decoded.events if e.line == "Async XLA Ops"}
    assert with_line == {"/device:TPU:0"}
    ops = traces[TPU].device_ops()
    dones = ops[ops["name"].astype(str).str.contains(r"^copy-done")]
    assert dones["device"].nunique() == 4

    def summed(rows: Any) -> Any:
        table = device_model.top_ops(rows, limit=len(rows))
        table["host"], table["device"] = "", ""
        device_model.add_rates(table, None)
        return table.set_index("name")

    over_all = summed(dones)
    assert over_all["async_s"].isna().all() and over_all["bytes_per_s"].isna().all()
    mine = dones[dones["device"] == "TPU:0"]
    over_one = summed(mine)
    own = mine.set_index("name")
    for name in own.index:
        assert over_one.loc[name, "async_s"] == pytest.approx(own.loc[name, "async_s"])
        assert over_one.loc[name, "bytes_per_s"] == pytest.approx(own.loc[name, "bytes_per_s"])


@pytest.mark.parametrize("name", SHARED_XPLANES)
def test_top_ops_agree_with_xprof_hlo_stats(
    traces: dict[str, Any], xprof: dict[tuple[str, str], Any], name: str
) -> None:
    top = device_model.top_ops(traces[name].device_ops(), limit=10_000).set_index("name")
    expected = rows(xprof[(name, "hlo_stats")])[:10]
    assert expected
    for row in expected:  # XProf: microseconds, summed over every device
        mine = top.loc[row["hlo_op_name"]]
        assert mine["occurrences"] == row["occurrences"]
        assert close(mine["total_s"] * 1e6, row["total_time"]), row["hlo_op_name"]
        assert close(mine["self_s"] * 1e6, row["total_self_time"]), row["hlo_op_name"]


def test_tpu_async_copy_rates_come_only_from_matched_start_done_pairs(
    traces: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN the TPU v6e capture, where copy-done.1 and copy-done.3 wait 3 ns for copies that had
    # already landed: XProf's hlo_stats puts them at ~1.7e9 GiB/s (1.8 EB/s) over that wait
    stats = {
        r["hlo_op_name"]: r
        for r in rows(xprof_tool(shared_trace(TPU), "hlo_stats", tmp_path), strict=False)
    }
    assert stats["copy-done.1"]["measured_memory_bw"] > 1e9
    # AND, decoded independently of xlaprof, each pair's span on TPU:0's Async XLA Ops line
    # (its events are named by the start's HLO text, whose shape gives the bytes moved)
    decoded = decode_xspace(shared_trace(TPU))
    spans: dict[str, list[float]] = {}
    moved: dict[str, int] = {}
    for event in decoded.on("/device:TPU:0"):
        if event.line != "Async XLA Ops":
            continue
        start = event.name.split(" = ", 1)[0].lstrip("%")
        spans.setdefault(start, []).append(event.end_ns - event.start_ns)
        dims = event.name.split("f32[", 1)[1].split("]", 1)[0].split(",")
        moved[start] = 4 * math.prod(int(d) for d in dims)
    ops = traces[TPU].device_ops()
    mine = ops[ops["device"] == "TPU:0"].set_index("name")
    # THEN a copy-start has no rate, and every copy-done's rate is its bytes over its pairs'
    # spans: a transfer rate a link can have, never bytes over the done's own wait (xlaprof
    # moves the spans onto the chip's clock, which the raw host-clock spans miss by up to 10%)
    assert mine.loc["copy-start.4", "bytes_per_s"] != mine.loc["copy-start.4", "bytes_per_s"]
    for start, durations in spans.items():
        done = start.replace("start", "done")
        expected = moved[start] * len(durations) / (sum(durations) / 1e9)
        assert mine.loc[done, "bytes_per_s"] == pytest.approx(expected, rel=0.12), done
        assert mine.loc[done, "bytes_per_s"] < 1e12, done
        assert mine.loc[done, "async_s"] > mine.loc[done, "self_s"]


@pytest.mark.parametrize("name", [TPU, MI300], ids=["tpu", "mi300x"])
def test_ops_rank_by_self_time_as_xprof_hlo_stats(name: str, tmp_path: Path) -> None:
    from xlaprof.tables.device import top_ops

    path = shared_trace(name)
    expected = rows(xprof_tool(path, "hlo_stats", tmp_path), strict=False)
    expected.sort(key=lambda r: -r["total_self_time"])
    mine = top_ops(load_trace(path).device_ops(), limit=10)
    # THEN the top ops are XProf's, in XProf's order, by self time (XProf leaves out kernels
    # no XLA op launched, such as ROCm's copyBuffer: compared on the ops it has)
    known = {r["hlo_op_name"] for r in expected}
    ranked = [name for name in mine["name"] if name in known]
    assert ranked[:3] == [r["hlo_op_name"] for r in expected[:3]]


def test_wrappers_rank_by_their_own_time_and_name_their_children(jax_cpu_trace: Any) -> None:
    ops = jax_cpu_trace.device_ops()
    wrapper = ops[ops["name"] == "while.24"].iloc[0]
    # GIVEN while.24 (JAX's RNG loop: 15.95 ms total, 56 µs of its own)
    assert wrapper["total_s"] > 100 * wrapper["self_s"]
    # THEN it ranks by its own time, below the copy it wraps, which names it as its parent
    ranked = list(ops["name"])
    assert ranked.index("copy.11") < ranked.index("while.24")
    assert ops[ops["name"] == "copy.11"].iloc[0]["parent"] == "while.24"


def test_framework_ops_group_kernels_as_xprof_framework_op_stats(tmp_path: Path) -> None:
    expected = [
        r
        for r in rows(
            xprof_tool(shared_trace(FUSED_ATTN), "framework_op_stats", tmp_path)[0], strict=False
        )
        if r["host_or_device"] == "Device" and r["type"] != "IDLE"
    ]
    ops = load_trace(shared_trace(FUSED_ATTN)).device_ops()
    totals = ops.groupby("framework_op")["total_s"].sum()
    # THEN the top framework ops' device time is XProf's (µs), by the same names. (The third,
    # a dot_general, is 9% more here: its kernels' ``name`` stat also labels two reduce
    # fusions XProf files under other ops; the top two are the fused-attention kernels.)
    for row in expected[:2]:
        assert totals[row["operation"]] * 1e6 == pytest.approx(row["total_time"], rel=0.01)


def test_h100_keeps_full_kernel_names_beside_short_ones() -> None:
    ops = load_trace(gpu_sample(GPU_JAX)).device_ops()
    delay = ops[ops["name"].astype(str).str.contains("DelayKernel")].iloc[0]
    assert "(" in delay["name"] and "(" not in delay["short_name"].replace("(anonymous", "")


def test_firsts_are_pandas_grouped_firsts(traces: dict[str, Any], jax_trace: Any) -> None:
    """Each op's first known text (``categorical.firsts``, as ``device_ops`` reads it) is
    pandas' grouped ``first`` of the same object column: the first value that is not missing,
    None for a group with none."""
    import numpy as np
    import pandas as pd

    from xlaprof.tables.categorical import firsts

    checked = 0
    for trace in [*traces.values(), jax_trace]:
        frame = device_model.device_events(trace.events)
        if frame.empty:  # no timed device event (the CUPTI range profiler's capture)
            continue
        group = pd.factorize(frame["op"].to_numpy(dtype=object))[0]
        group = np.where(group < 0, group.max() + 1, group)
        for column in ("hlo_category", "program_id", "hlo_module", "short_name", "parent_op"):
            values = frame[column].astype(object).reset_index(drop=True)
            expected = values.groupby(group, sort=True).first()
            found = firsts(values.to_numpy(), group, int(group.max()) + 1 if len(group) else 0)
            assert found.tolist() == expected.reindex(range(len(found))).tolist()
            checked += int(pd.isna(found).sum()) > 0 and int(pd.notna(found).sum()) > 0
    assert checked  # columns with groups of both kinds were compared
