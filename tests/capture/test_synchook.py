"""A step's host CPU split at the sync that ended it (``xlaprof.capture.synchook``), against the
script's own reading of its thread's CPU clock on the real runtime."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import profiled_run

from xlaprof.rundir.reader import load_run

pytestmark = pytest.mark.runtime


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
    run = profiled_run(script, tmp_path / "run")
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


FSDP_SCRIPT = r"""
import functools
import torch, torch_xla
from torch import nn
from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
from torch_xla.distributed.fsdp.wrap import size_based_auto_wrap_policy

device = torch_xla.device()
layers = [nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 16)]
policy = functools.partial(size_based_auto_wrap_policy, min_num_params=1000)
model = FSDP(nn.Sequential(*layers).to(device), auto_wrap_policy=policy)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    model(torch.randn(8, 32, device=device)).pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()
    torch_xla.sync()
"""


def test_a_sharding_wrappers_constructor_syncs_end_no_step(tmp_path: Path) -> None:
    # GIVEN FSDP with auto-wrapping, whose constructor syncs once per wrapped submodule
    # (execute_sharding_on_init), then 4 training iterations with a sync each
    script = tmp_path / "fsdp.py"
    script.write_text(FSDP_SCRIPT)
    # WHEN it runs under xlaprof run
    run = load_run(profiled_run(script, tmp_path / "out"))
    # THEN the run has the script's 4 steps: the constructor's syncs are set-up, in step 0
    assert [row.step for row in run.step_rows()] == [0, 1, 2, 3]
