"""Host-bound steps (``xlaprof.analyzers.host_bound``), against XProf's own conclusion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import GPU_JAX, cli, gpu_sample


def test_h100_steps_are_host_bound_as_xprof_says(tmp_path: Path) -> None:
    # XProf: "POTENTIALLY input-bound because 98.1% of the step is 'All Others'" (host time)
    done = cli("analyze", "--json", str(gpu_sample(GPU_JAX)))
    findings = {f["kind"]: f for f in json.loads(done.stdout)["findings"]}
    assert findings["host_bound"]["evidence"]["share_of_step_time"] == pytest.approx(0.98, abs=0.01)
