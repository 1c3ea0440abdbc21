"""Nested profiling: ``xlaprof.profile()`` inside another session (``xlaprof run``, or an
enclosing ``profile()``) chains the sync hooks, so both runs record every step, each says what
happened, and ``analyze`` of a folder holding both says which it read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import DATA, REPO

from xlaprof.inputs.paths import load_parts
from xlaprof.model.input import input_from_run
from xlaprof.rundir.reader import load_run

SCRIPT = """
import sys
import torch, torch_xla
import xlaprof

out = sys.argv[1]
device = torch_xla.device()
w = torch.randn(16, 16, device=device)

def step():
    global w
    with xlaprof.region("work"):
        w = (w @ w).tanh()
    torch_xla.sync()

with xlaprof.profile(out):
    for _ in range(2):
        step()
    with xlaprof.profile(out + "/inner"):
        for _ in range(3):
            step()
    outer_again = torch_xla.sync._xlaprof_session is not None
    for _ in range(2):
        step()
raw = not hasattr(torch_xla.sync, "_xlaprof_session")
print("outer hook back:", outer_again, "raw sync back:", raw)
"""


@pytest.mark.runtime
def test_a_profile_inside_a_profile_records_in_both(tmp_path: Path) -> None:
    # GIVEN a script whose profile() holds another profile() around three of its seven steps
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(SCRIPT))
    out = tmp_path / "runs"
    result = subprocess.run(
        [sys.executable, str(script), str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        env={**os.environ, "PJRT_DEVICE": "CPU"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # THEN the outer run recorded all 7 steps and the inner its 3, each saying how they nest
    (outer,) = [p.parent for p in out.glob("*/run.json")]
    (inner,) = [p.parent for p in (out / "inner").glob("*/run.json")]
    outer_info = json.loads((outer / "run.json").read_text())
    inner_info = json.loads((inner / "run.json").read_text())
    assert outer_info["steps_recorded"] == 7 and inner_info["steps_recorded"] == 3
    assert outer_info["nested_runs"] == [str(inner)]
    assert inner_info["outer_run"] == str(outer)
    assert any("from step 2 on" in w and str(inner) in w for w in outer_info["warnings"])
    assert any(f"nested in the run {outer}" in w for w in inner_info["warnings"])
    # AND regions timed inside the inner block count in the outer run too
    regions = [json.loads(line) for line in (outer / "regions.jsonl").open()]
    assert sum(r["calls"] for r in regions if r["name"] == "work") == 7
    # AND the inner session gave the sync back to the outer one, which gave back the raw sync
    assert "outer hook back: True raw sync back: True" in result.stdout
    # WHEN the folder holding both is analyzed THEN the outer run is, and it says why the inner
    # one is not, with its step count as its header has it
    parts = load_parts([out], max_bytes=1 << 30)
    assert [p.run_summary.path for p in parts] == [str(outer)]
    assert parts[0].data.step_count() == parts[0].run_summary.steps_recorded == 7
    assert any(
        f"{inner}: an xlaprof.profile() nested in this run" in w
        for w in (parts[0].run_summary.warnings)
    )


def test_a_run_without_steps_counts_none_in_its_table(tmp_path: Path) -> None:
    # GIVEN a run directory that recorded no step although its metrics report counts 6 syncs
    # (the outer run of a nested profile() before nesting was handled)
    run = tmp_path / "host-1"
    (run / "metrics").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"schema": 1, "status": "ok", "steps_recorded": 0}))
    shutil.copy(DATA / "messy_metrics.log", run / "metrics" / "final.txt")
    data = input_from_run(load_run(run))
    # WHEN its steps are counted THEN the table says what the header says: 0 steps recorded
    assert data.counters().get("MarkStep")
    assert data.step_count() == 0
