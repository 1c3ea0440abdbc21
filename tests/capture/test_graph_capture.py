"""Graph capture whatever was created before profiling: XLA reads ``XLA_FLAGS`` once, when the
runtime client is created, so a ``profile()`` entered after ``torch_xla.device()`` takes the
graphs from the live tensors; a user's own ``--xla_dump_to`` is kept and read, never emptied.

Truth here is XLA's own HLO dump of the same script (profile() entered before the device), not
xlaprof's output."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import REPO, analyze_json

from xlaprof.capture.graphs import dump_folder, needs_text_flag, user_dump
from xlaprof.parse.hlo import parse_hlo

SCRIPT = """
import os, sys
import torch, torch_xla
from torch import nn
import torch_xla.debug.metrics as met
import xlaprof

class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(32, 32) for _ in range(6)])

    def forward(self, x):
        for layer in self.layers:  # the loop
            x = torch.tanh(layer(x))
        return x.sum()

out, early = sys.argv[1], sys.argv[2] == "early"
torch.manual_seed(0)
session = xlaprof.profile(out) if early else None
if early:
    session.__enter__()
device = torch_xla.device()
model = Stack().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
if not early:  # the README's pattern: device and model first
    session = xlaprof.profile(out)
    session.__enter__()
for step in range(4):
    loss = model(torch.randn(8, 32).to(device))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    torch_xla.sync()
    if step == 3:
        print("read", (loss * 3).item())  # a graph compiled outside any sync, mid-step
session.__exit__(None, None, None)
print("COMPILES", met.metric_data("CompileTime")[0])
"""


# Gradient accumulation with a sync after each micro-batch: at the first two syncs of every
# three the gradients are live (backward ran, the optimizer has not stepped yet), and only
# autograd holds them, with no Python object until the optimizer reads .grad.
ACCUMULATE = """
import sys
import torch, torch_xla
from torch import nn
import torch_xla.debug.metrics as met
import xlaprof

out, early = sys.argv[1], sys.argv[2] == "early"
torch.manual_seed(0)
session = xlaprof.profile(out) if early else None
if early:
    session.__enter__()
device = torch_xla.device()
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
if not early:
    session = xlaprof.profile(out)
    session.__enter__()
for step in range(6):
    loss = model(torch.randn(8, 32).to(device)).sum()
    loss.backward()
    if step % 3 == 2:
        optimizer.step()
        optimizer.zero_grad()
    torch_xla.sync()
session.__exit__(None, None, None)
print("COMPILES", met.metric_data("CompileTime")[0])
"""


def _run(tmp_path: Path, mode: str, env: dict[str, str] | None = None, script_text=SCRIPT):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(script_text))
    out = tmp_path / mode
    result = subprocess.run(
        [sys.executable, str(script), str(out), mode],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        env={**os.environ, "PJRT_DEVICE": "CPU", **(env or {})},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = out.glob("*/run.json")
    return run.parent, json.loads(run.read_text()), result


def _graphs(directory: Path) -> list[tuple[dict, object]]:
    entries = [json.loads(line) for line in (directory / "graphs/index.jsonl").open()]
    return [
        (e, parse_hlo(gzip.open(directory / "graphs" / e["file"]).read().decode()))
        for e in entries
        if e.get("file")
    ]


def _ops(module) -> list[str]:
    return [i.signature for i in module.instructions if i.opcode not in ("parameter", "constant")]


def _computed(module) -> list[str]:
    """The ops of a module but its root tuple, in a fixed order."""
    return sorted(op for op in _ops(module) if not op.startswith("tuple:"))


def test_dump_flags_are_read_as_xla_reads_them(tmp_path: Path) -> None:
    # GIVEN XLA_FLAGS strings as users write them WHEN the dump folder is read THEN the last
    # --xla_dump_to wins, a relative folder is the working directory's, stdout is not a folder,
    # and text is added only where the user named another format
    assert dump_folder("--xla_dump_to=/a --xla_cpu_fast_math=false --xla_dump_to=/b") == "/b"
    assert dump_folder("--xla_cpu_fast_math=false") is None
    assert user_dump("--xla_dump_to=dumps", str(tmp_path)) == tmp_path / "dumps"
    assert user_dump("--xla_dump_to=-", str(tmp_path)) == "-"
    assert not needs_text_flag("--xla_dump_to=/a")
    assert needs_text_flag("--xla_dump_to=/a --xla_dump_hlo_as_proto")
    assert not needs_text_flag("--xla_dump_to=/a --xla_dump_hlo_as_proto --xla_dump_hlo_as_text")


@pytest.mark.runtime
def test_graphs_after_the_device_are_the_graphs_xla_compiles(tmp_path: Path) -> None:
    # GIVEN one script profiled twice: profile() entered before torch_xla.device() (XLA's own
    # dump) and after it and the model (the README's pattern, where XLA no longer reads flags)
    early, early_info, _ = _run(tmp_path, "early")
    late, late_info, result = _run(tmp_path, "late")
    # THEN the late run took its graphs from the live tensors and said so
    assert early_info["graph_source"] == "dump" and late_info["graph_source"] == "live"
    assert any("graphs taken from the live tensors" in w for w in late_info["warnings"])
    # AND its training graphs are XLA's: the same ops in the same order, the same inputs
    reference, live = _graphs(early), _graphs(late)
    assert len(live) == 2  # the two warm-up graphs of the sync; the .item() graph is not one
    by_step = {e["step"]: m for e, m in reference}
    for entry, module in live:
        assert entry["captured"] == "live" and entry["source_lines"] is True
        expected = by_step[entry["step"]]
        assert _ops(module) == _ops(expected)
        assert sorted(p.shape for p in module.parameters) == sorted(
            p.shape for p in expected.parameters
        )
    # AND taking them compiled nothing: both runs compiled what the runtime counted
    compiles = int(result.stdout.split("COMPILES")[1])
    assert late_info["steps_recorded"] == early_info["steps_recorded"] == 4
    assert compiles == 3  # two warm-up graphs and the .item() graph
    # AND the graph it could not take (compiled by .item(), outside a sync) is said aloud
    missing = [w for w in late_info["warnings"] if "1 of 3 compiled graphs not captured" in w]
    assert missing and "1 of 3 compiled graphs not captured" in result.stderr
    # AND looking for the live tensors read no attribute that warns (a FutureWarning of
    # torch.distributed.reduce_op, read by isinstance, reached the user's stderr)
    assert "FutureWarning" not in result.stderr and "DeprecationWarning" not in result.stderr
    # AND the unrolled loop is found from the live graphs, in the user's loop, as from the dump
    findings = {}
    for name, directory in (("early", early), ("late", late)):
        document = analyze_json(directory)
        (findings[name],) = [f for f in document["findings"] if f["kind"] == "unrolled_loop"]
    loop = findings["late"]
    script_lines = (tmp_path / "job.py").read_text().splitlines()
    loop_line = next(n for n, t in enumerate(script_lines, 1) if t.strip().endswith("# the loop"))
    assert loop["location"]["line"] in (loop_line, loop_line + 1)
    assert (loop["title"], loop["location"]) == (
        findings["early"]["title"],
        findings["early"]["location"],
    )


@pytest.mark.runtime
def test_graphs_after_the_device_include_the_gradients_live_at_a_sync(tmp_path: Path) -> None:
    # GIVEN a loop that accumulates gradients over synced micro-batches, profiled with
    # profile() entered before torch_xla.device() (XLA's own dump) and after the model
    early, _, early_result = _run(tmp_path, "early", script_text=ACCUMULATE)
    late, late_info, result = _run(tmp_path, "late", script_text=ACCUMULATE)
    compiles = int(result.stdout.split("COMPILES")[1])
    assert compiles == int(early_result.stdout.split("COMPILES")[1])
    # THEN every graph the runtime compiled was taken from the live tensors, none said missing
    live = _graphs(late)
    assert late_info["graph_source"] == "live" and len(live) == compiles
    assert not [w for w in late_info["warnings"] if "not captured" in w]
    # AND each computes what XLA compiled at that step, gradients included: the same ops on the
    # same inputs (XLA's also returns the gradients' view bases, which no Python object reaches,
    # so its root tuple is longer and its ops are lowered in another order)
    by_step = {e["step"]: m for e, m in _graphs(early)}
    assert sorted(by_step) == sorted(e["step"] for e, _ in live)
    for entry, module in live:
        expected = by_step[entry["step"]]
        assert _computed(module) == _computed(expected)
        assert [p.shape for p in module.parameters] == [p.shape for p in expected.parameters]


@pytest.mark.runtime
def test_a_users_own_dump_folder_is_kept_and_read(tmp_path: Path) -> None:
    # GIVEN a user dumping HLO into their own folder, which already holds an earlier file
    dump = tmp_path / "mine"
    dump.mkdir()
    (dump / "module_0099.earlier.before_optimizations.txt").write_text("HloModule earlier\n")
    flags = f"--xla_dump_to={dump}"
    # WHEN the script is profiled from its start
    directory, info, _ = _run(tmp_path, "early", {"XLA_FLAGS": flags})
    # THEN the user's folder kept the earlier file and got this run's dumps, which xlaprof
    # copied into graphs/ (XLA_FLAGS untouched: no --xla_dump_to of xlaprof's own)
    assert (dump / "module_0099.earlier.before_optimizations.txt").exists()
    assert len(list(dump.glob("*.before_optimizations.txt"))) == 1 + 3
    assert info["graph_source"] == "user_dump"
    assert info["env"]["XLA_FLAGS"].count("xla_dump_to") == 1
    assert dump_folder(info["env"]["XLA_FLAGS"]) == str(dump)
    graphs = _graphs(directory)
    assert len(graphs) == 3 and not any("earlier" in e["module"] for e, _ in graphs)
    assert not (directory / ".xla_dump").exists()
