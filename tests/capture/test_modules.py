"""The module tree of a forward pass (``xlaprof.capture.modules``), recorded in-process on the
real torch: stacks of identical children and modules called more than once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
