"""Per-op tables of a capture's devices (``xlaprof.tables.device.ops``), against XProf.

Expected values come from XProf's own converters run on the same file (``hlo_stats``, the
``conftest.xprof`` fixture) and from the capture's event metadata.
"""

from __future__ import annotations

from typing import Any

import pytest
from decode import close, rows
from helpers import SHARED_XPLANES, TPU

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
