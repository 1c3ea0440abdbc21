"""The training-process side in one process over time: a second ``profile()`` session, and a
profiler that fails while the job runs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import REPO

pytestmark = pytest.mark.runtime

SCRIPT = """
import json, os, sys
import torch, torch_xla
import xlaprof

out = sys.argv[1]
flags_before = os.environ.get("XLA_FLAGS")
device = torch_xla.device()
w = torch.randn(8, 8, device=device)
for _ in range(2):  # two sessions, one after the other, in one process
    with xlaprof.profile(out=out):
        for _ in range(3):
            with xlaprof.region("work"):
                w = (w @ w).tanh()
            torch_xla.sync()
    print(json.dumps({"flags_after": os.environ.get("XLA_FLAGS"), "before": flags_before}))

# a TraceMe that cannot be created must not reach user code: the region is still timed
from xlaprof.capture import annotate

class Broken:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("profiler unavailable")

annotate.STATE.trace_cls = Broken
with xlaprof.profile(out=out + "-broken"):
    for _ in range(2):
        with xlaprof.region("work"):
            w = (w @ w).tanh()
        torch_xla.sync()
print("survived")
"""


def _runs(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("*/run.json"))]


def test_a_second_session_records_and_says_what_it_cannot(tmp_path: Path) -> None:
    # GIVEN a script that opens two profile() sessions in turn, then one whose TraceMe fails
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(SCRIPT))
    out = tmp_path / "runs"
    # WHEN it runs (no xlaprof run: profile() alone)
    result = subprocess.run(
        [sys.executable, str(script), str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        env={**__import__("os").environ, "PJRT_DEVICE": "CPU"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # THEN both sessions recorded their 3 steps; only the second says it has no debug analysis
    first, second = sorted(_runs(out), key=lambda info: info["started"])
    assert first["steps_recorded"] == 3 and second["steps_recorded"] == 3
    assert not any("second profiling session" in w for w in first["warnings"])
    assert any("second profiling session" in w for w in second["warnings"])
    # AND each session put the environment back: no --xla_dump_to left behind, none doubled
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [line["flags_after"] for line in lines] == [lines[0]["before"]] * 2
    # AND the failing TraceMe did not stop the job; its region was still timed per step
    assert "survived" in result.stdout
    (broken,) = _runs(Path(f"{out}-broken"))
    assert broken["steps_recorded"] == 2
    regions = (next(Path(f"{out}-broken").glob("*/regions.jsonl"))).read_text().splitlines()
    assert [json.loads(r)["calls"] for r in regions] == [1, 1]
