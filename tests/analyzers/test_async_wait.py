"""Waits on asynchronous copies (``xlaprof.analyzers.async_wait``), on the real TPU capture."""

from __future__ import annotations

import json
from typing import Any

from helpers import TPU, cli, shared_trace


def test_tpu_is_bound_by_host_offload_waits(traces: dict[str, Any]) -> None:
    done = cli("analyze", "--json", str(shared_trace(TPU)))
    findings = {f["kind"]: f for f in json.loads(done.stdout)["findings"]}
    wait = findings["async_wait"]
    # copy-done ops, waiting on 5.37 GB copies from host memory: 97% of each step
    assert wait["evidence"]["share_of_step_time"] > 0.9
    assert "copy-done.4" in wait["evidence"]["top_wait_ops"]
