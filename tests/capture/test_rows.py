"""A run's per-step files stay under their cap (``xlaprof.capture.rows``), and the run says
what was dropped (issue 31)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import cli

# -- 8: a run's disk use is bounded --------------------------------------------------------------
LOOP = """
import torch
import torch_xla
device = torch_xla.device()
x = torch.ones(4, device=device)
for step in range(80):
    x = x * 1.01 + 1
    torch_xla.sync()
print(x.sum().item())
"""


@pytest.mark.runtime
def test_per_step_files_stop_at_their_cap_and_say_what_was_dropped(tmp_path: Path) -> None:
    # GIVEN a loop of 80 steps, profiled with each per-step file capped at 6000 bytes
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    cap = 6000
    out = cli(
        "run", "-q", "--out", str(tmp_path / "out"), "--", sys.executable, str(script),
        env={"XLAPROF_MAX_FILE_SIZE": str(cap)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (run,) = (tmp_path / "out").iterdir()
    # THEN no per-step file is over the cap, the debug log has no hole (torch_xla appends at
    # the cut), and run.json counts what was dropped and says so
    for name in ("steps.jsonl", "regions.jsonl", "samples.jsonl", "debug.log", "fallbacks.log"):
        assert (run / name).stat().st_size <= cap, name
    assert b"\x00" not in (run / "debug.log").read_bytes()
    info = json.loads((run / "run.json").read_text())
    assert info["steps_recorded"] == 80
    assert info["dropped"]["steps.jsonl"] == 80 - len(
        (run / "steps.jsonl").read_text().splitlines()
    )
    assert info["dropped"]["debug.log"] > 0
    assert any(w.startswith("steps.jsonl reached its cap of 6000 bytes") for w in info["warnings"])
    # AND the run still analyzes, its warnings included
    document = cli("analyze", str(run), "--json")
    assert document.returncode == 0, document.stderr
    assert any("reached its cap" in w for w in json.loads(document.stdout)["run"]["warnings"])
