"""The module tree of a forward pass (``xlaprof.capture.modules``), recorded in-process on the
real torch: stacks of identical children and modules called more than once."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import cli

from xlaprof.capture.modules import ModuleRecorder
from xlaprof.parse.frames import is_library_file

torch = pytest.importorskip("torch")


def _line_of(needle: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(
        n for n, text in enumerate(lines, start=1) if needle in text and "_line_of" not in text
    )


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.act = torch.nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x))


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([Block() for _ in range(6)])
        self.cell = torch.nn.GRUCell(8, 8)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        h = torch.zeros_like(x)
        for _t in range(5):
            h = self.cell(x, h)
        return h


def test_module_calls_and_stacks_are_recorded() -> None:
    # GIVEN a ModuleList of 6 blocks and a cell applied 5 times WHEN one forward is recorded
    recorder = ModuleRecorder(is_library_file)
    recorder.start()
    Model()(torch.ones(2, 8))
    recorder.stop()
    summary = json.loads(json.dumps(recorder.summary()))  # plain data
    # THEN the stack has 6 identical children called from the loop body, directly
    (stack,) = [s for s in summary["stacks"] if s["attribute"] == "layers"]
    assert stack["owner_class"] == "Model" and stack["class"] == "ModuleList"
    assert [c["class"] for c in stack["children"]] == ["Block"] * 6
    assert len({c["params"] for c in stack["children"]}) == 1
    assert stack["child_sites"] == [
        {"where": f"{__file__}:{_line_of('x = layer(x)')}", "direct": True}
    ]
    # and the cell is a module called 5 times from one line
    (cell,) = [r for r in summary["repeated"] if r["name"] == "cell"]
    assert cell["calls"] == 5 and cell["class"] == "GRUCell"
    assert cell["sites"][0]["where"].endswith(f":{_line_of('h = self.cell(x, h)')}")
    # and once stopped, module calls are no longer counted
    Model()(torch.ones(2, 8))
    assert recorder.summary()["repeated"] == []


CLOSURE_SCRIPT = """\
import numpy as np
import torch
import torch_xla
import torch_xla.core.xla_model as xm
from torch import nn


class Norm(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = Norm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return x + torch.tanh(self.fc(self.norm(x)))


class Model(nn.Module):
    def __init__(self, width=16, depth=6):
        super().__init__()
        self.layers = nn.ModuleList([Block(width) for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def log(loss):
    # a logging closure that averages over replicas: mesh_reduce syncs, inside the step's sync
    xm.mesh_reduce("loss", loss.item(), np.mean)


device = torch_xla.device()
model = Model().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(4):
    loss = model(torch.randn(8, 16).to(device)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    xm.add_step_closure(log, args=(loss,))
    torch_xla.sync()
"""


@pytest.mark.runtime
def test_a_step_closure_that_syncs_leaves_the_module_window_to_a_forward(tmp_path: Path) -> None:
    # GIVEN a 6-block stack whose logging step closure syncs (xm.mesh_reduce), so that the
    # step model sees steps holding only the closure's graph: the module window (one step)
    # once recorded such a step, and modules.json had no stack (issue 29: the finding then
    # landed inside the RMSNorm-like Norm)
    script = tmp_path / "closure_train.py"
    script.write_text(CLOSURE_SCRIPT)
    run = cli("run", "-q", "--out", str(tmp_path / "out"), "--", sys.executable, str(script))
    assert run.returncode == 0, run.stderr
    (modules_file,) = (tmp_path / "out").glob("*/modules.json")
    # WHEN the run is read THEN the window held a forward: the stack is there, with its call
    modules = json.loads(modules_file.read_text())
    (stack,) = [s for s in modules["stacks"] if s["attribute"] == "layers"]
    assert stack["call"] == {"args": ["tensor"], "kwargs": {}, "output": "tensor"}
    loop = CLOSURE_SCRIPT.splitlines().index("        for layer in self.layers:") + 1
    assert stack["applied_by"]["loop_line"] == loop and not stack["applied_by"]["library"]
    # and the finding is at the loop, naming the stack
    analysis = cli("analyze", str(tmp_path / "out"), "--json", "--source-root", str(tmp_path))
    findings = json.loads(analysis.stdout)["findings"]
    (finding,) = [f for f in findings if f["kind"] == "unrolled_loop"]
    assert (finding["location"]["file"], finding["location"]["line"]) == (str(script), loop)
    assert finding["location"]["what"].startswith("the loop over the layer stack")
    assert finding["evidence"]["layer_stack"].startswith("self.layers of Model")
