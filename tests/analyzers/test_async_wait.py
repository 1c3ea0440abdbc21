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


# A finding names a line only where it holds a real share of the time it is about: a tenth.
LINE_SHARE = 0.10


def test_tpu_wait_names_no_line_the_waits_do_not_run_at(traces: dict[str, Any]) -> None:
    trace = traces[TPU]
    ops = trace.device_ops()
    names = ops["name"].astype(str)
    waiting = (ops["category"] == "host_offload") | names.str.contains(r"-done(?:\.\d+)?$")
    wait_s = float(ops[waiting]["self_s"].sum())  # 304 s of copy-done
    lines = trace.device_summary.lines
    done = cli("analyze", "--json", str(shared_trace(TPU)))
    wait = {f["kind"]: f for f in json.loads(done.stdout)["findings"]}["async_wait"]
    where = wait["location"]
    if where is not None:  # the old code named line 37: 4.44 ms of a broadcast, 0.0% of it
        at = lines[(lines["file"] == where["file"]) & (lines["line"] == where["line"])]
        assert float(at["device_s"].sum()) / wait_s >= LINE_SHARE, where
    assert where is None
    assert wait["evidence"]["source_line"].startswith("none: ")  # says why, in words
    assert wait["evidence"]["share_of_step_time"] > 0.9  # the finding and its evidence stay


def test_tpu_wait_lines_are_of_waiting_ops(traces: dict[str, Any]) -> None:
    """The lines an async-wait finding weighs are of copies and host-offload transfers, not of
    the catch-all "other" ops (line 37's broadcast.2 is no wait)."""
    lines = traces[TPU].device_summary.lines
    waits = lines[lines["category"].isin({"host_offload", "copy"})]
    # the capture's HLO gives its copy-done waits no user frame
    assert waits["file"].isna().all() and float(waits["device_s"].sum()) > 300
    done = cli("analyze", "--json", str(shared_trace(TPU)))
    wait = {f["kind"]: f for f in json.loads(done.stdout)["findings"]}["async_wait"]
    named = wait["evidence"].get("top_device_lines", {})
    assert not named, named  # the old code weighed line 37 (4.44 ms of broadcast.2)
    assert (
        wait["evidence"]["source_line"] == "none: the waits have no user source line in the capture"
    )
