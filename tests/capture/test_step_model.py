"""One step per training iteration, whatever else syncs (capture/synchook.py's ``StepEnds``).

Issue 29 measured more steps than iterations when evaluation graphs or framework logging ran
(57 for 50, 14 for 12). The two scripts here reproduce the patterns: an evaluation loop that
syncs each batch under ``torch.no_grad()`` every 4 iterations, and an evaluation through its own
``MpDeviceLoader`` after each epoch of a loader-driven loop, both with step closures. Before
the step model judged syncs by loader batches and autograd they recorded 18 and 16 steps for 12
iterations. The Trainer's log points (``xm.mesh_reduce``'s rendezvous syncs, a ``mark_step``
before them) are judged on real code in tests/corpus/test_realcode.py (hf_trainer_bert).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import cli

from xlaprof.rundir.reader import load_run

pytestmark = pytest.mark.runtime

ITERATIONS = 12

_MODEL = """
import torch, torch_xla
import torch_xla.core.xla_model as xm
from torch import nn
device = torch_xla.device()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""

EVAL_SYNC_LOOP = (
    _MODEL
    + """
for step in range(12):
    x, y = torch.randn(8, 16).to(device), torch.randint(0, 4, (8,)).to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    xm.add_step_closure(lambda s, l: print(s, l.item()), args=(step, loss))
    xm.mark_step()
    if step % 4 == 3:
        model.eval()
        total = torch.zeros((), device=device)
        with torch.no_grad():
            for _ in range(2):
                total += model(torch.randn(8, 16).to(device)).sum()
                xm.mark_step()
        print("eval", total.item())
        model.train()
"""
)

LOADER_EPOCHS_EVAL = (
    _MODEL
    + """
import torch_xla.distributed.parallel_loader as pl
from torch.utils.data import DataLoader, TensorDataset
train = DataLoader(TensorDataset(torch.randn(48, 16), torch.randint(0, 4, (48,))), batch_size=8)
val = DataLoader(TensorDataset(torch.randn(16, 16), torch.randint(0, 4, (16,))), batch_size=8)
step = 0
for epoch in range(2):
    model.train()
    for x, y in pl.MpDeviceLoader(train, device):
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        xm.optimizer_step(optimizer)
        optimizer.zero_grad()
        if step % 3 == 0:
            xm.add_step_closure(lambda s, l: print(s, l.item()), args=(step, loss))
        step += 1
    model.eval()
    correct = torch.zeros((), device=device)
    with torch.no_grad():
        for x, y in pl.MpDeviceLoader(val, device):
            correct += (model(x).argmax(1) == y).sum()
    print("epoch", epoch, "val", correct.item())
"""
)


@pytest.mark.parametrize(
    "script", [EVAL_SYNC_LOOP, LOADER_EPOCHS_EVAL], ids=["eval_sync_loop", "loader_epochs_eval"]
)
def test_evaluation_and_closures_add_no_steps(tmp_path: Path, script: str) -> None:
    # GIVEN a 12-iteration training loop that also evaluates (syncing each evaluation batch, or
    # through a loader of its own) and logs through step closures
    path = tmp_path / "train.py"
    path.write_text(script)
    # WHEN it runs under xlaprof run
    result = cli("run", "-q", "--out", str(tmp_path / "run"), "--", sys.executable, str(path))
    assert result.returncode == 0, result.stderr[-2000:]
    # THEN the run records one step per training iteration
    assert load_run(tmp_path / "run").info.steps_recorded == ITERATIONS


# The README's "In code" loop (README.md), over an MpDeviceLoader of 12 batches, with momentum so
# the optimizer state appears in the second iteration (warm-up compiles in steps 0 and 1).
README_LOOP = (
    _MODEL.replace("lr=0.1)", "lr=0.1, momentum=0.9)")
    + """
import os
import subprocess
import sys
import torch_xla.distributed.parallel_loader as pl
import xlaprof
from torch.utils.data import DataLoader, TensorDataset
data = DataLoader(TensorDataset(torch.randn(96, 16), torch.randint(0, 4, (96,))), batch_size=8)
loader = pl.MpDeviceLoader(data, device)
with xlaprof.profile(out=sys.argv[1], trace_steps=(5, 8)):
    for batch in xlaprof.steps(loader):  # marks steps (visible in XProf)
        with xlaprof.region("forward"):  # shows up in traces, timed per step
            x, y = batch
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""
)
# xlaprof.steps over a plain DataLoader whose step is a torch_xla.compile'd function.
STEPS_OVER_COMPILE = (
    _MODEL.replace("lr=0.1)", "lr=0.1, momentum=0.9)")
    + """
import os
import subprocess
import sys
import xlaprof
from torch.utils.data import DataLoader, TensorDataset
data = DataLoader(TensorDataset(torch.randn(96, 16), torch.randint(0, 4, (96,))), batch_size=8)

@torch_xla.compile
def train_step(x, y):
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss

with xlaprof.profile(out=sys.argv[1], trace_steps=(5, 8)):
    for x, y in xlaprof.steps(data):
        train_step(x.to(device), y.to(device))
"""
)


# The same torch_xla.compile'd step without xlaprof.steps: its syncs mark the steps.
COMPILE_ONLY = STEPS_OVER_COMPILE.replace("xlaprof.steps(data)", "data")


@pytest.mark.parametrize(
    "script",
    [README_LOOP, STEPS_OVER_COMPILE, COMPILE_ONLY],
    ids=["readme_mpdeviceloader", "steps_compile", "compile_only"],
)
def test_marked_steps_are_iterations_and_pass_check(tmp_path: Path, script: str) -> None:
    # GIVEN a 12-iteration loop marked with xlaprof.steps under xlaprof.profile(), whose graph
    # compiles as the optimizer state appears (iterations 0 and 1) and never again
    path = tmp_path / "train.py"
    path.write_text(script)
    # WHEN it runs
    done = subprocess.run(
        [sys.executable, str(path), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env={**os.environ, "PJRT_DEVICE": "CPU"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # THEN each iteration is one step, numbered from 0, and the compiles (the bare runtime's
    # CompileTime deltas) fall in the two warm-up iterations, each its own
    steps = load_run(tmp_path / "run").steps()
    assert steps["step"].tolist() == list(range(ITERATIONS))
    assert steps["compiles"].tolist()[:2] == [1, 1]
    assert steps["compiles"].iloc[2:].sum() == 0
    # AND CI's check with no recompilation allowed passes it
    checked = cli("check", str(tmp_path / "run"), "--max-recompilations", "0")
    assert checked.returncode == 0, checked.stdout + checked.stderr
