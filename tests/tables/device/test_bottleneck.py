"""Per-step bottlenecks (``xlaprof.tables.device.bottleneck``): what each step of a capture was
bound by, per device where no host marks the steps.

Expected values come from what the capturing script did (the JAX-on-CPU capture's README: steps
104 and 107 sleep 40 ms in ``load_batch``, steps 100 and 108 compile) and from the capture.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from helpers import MI300, cli, shared_trace

from xlaprof.inputs.traces import load_trace


def test_jax_cpu_bottleneck_per_step_is_what_the_script_did(jax_cpu_trace: Any) -> None:
    verdict = jax_cpu_trace.bottlenecks().set_index("step")["bottleneck"].to_dict()
    # the script: compile in 100, 40 ms input pauses in 104 and 107, a recompile in 108
    assert verdict[100] == verdict[108] == "compilation"
    assert verdict[104] == verdict[107] == "input"
    assert {verdict[s] for s in (101, 102, 103, 105, 106, 109)} == {"compute"}


def test_two_hosts_of_gpus_without_step_markers_exit_zero_with_per_device_steps(
    tmp_path: Path,
) -> None:
    # GIVEN a logdir of two hosts: two copies of the MI300X capture (8 GPUs, no steps)
    session = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    for host in ("host-a", "host-b"):
        shutil.copy(shared_trace(MI300), session / f"{host}.xplane.pb")
    # WHEN analyzed
    done = cli("analyze", "--json", str(tmp_path))
    # THEN it exits 0 with each device's whole capture as one window and its bottleneck
    assert done.returncode == 0, done.stderr
    trace = json.loads(done.stdout)["trace"]
    assert len(trace["bottleneck_by_device"]) == 16
    assert {row["bottleneck"] for row in trace["bottleneck_by_device"]} == {"host"}
    per_device = load_trace(tmp_path).step_times(per_device=True)
    assert len(per_device) == 16 and per_device["step"].isna().all()


def test_busiest_bounds_is_each_steps_busiest_device(traces: dict[str, Any]) -> None:
    """Per (session, host, step), the bound of its busiest device's row (the first such row
    on a tie), as pandas finds it: the rows by busy time, descending and stable, then the
    first of each step. Checked on every shared capture with several devices a step."""
    import pandas as pd

    from xlaprof.tables.device.bottleneck import CLASS_BOUNDS, busiest_bounds

    checked = 0
    for trace in traces.values():
        table = trace.summary().bottleneck
        rows = table[table["step"].notna() & table["bottleneck"].notna()]
        if rows.empty:
            continue
        first = rows.sort_values("busy_s", ascending=False, kind="stable").drop_duplicates(
            ["session", "host", "step"]
        )
        expected = pd.DataFrame(
            {
                "session": first["session"].astype(str).to_numpy(),
                "host": first["host"].astype(str).to_numpy(),
                "step": first["step"].astype("int64").to_numpy(),
                "bound": first["bottleneck"].map(CLASS_BOUNDS).to_numpy(),
                "bound_share": first["share"].astype("float64").to_numpy(),
            }
        ).sort_values(["session", "host", "step"], ignore_index=True)
        pd.testing.assert_frame_equal(busiest_bounds(table), expected, check_exact=True)
        checked += rows.duplicated(["session", "host", "step"]).any()
    assert checked  # some capture has several devices in one step
