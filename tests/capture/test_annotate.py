"""Annotations on the real runtime: same results and compiles, regions visible in the trace."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

from xlaprof.inputs.traces import load_trace
from xlaprof.rundir.reader import load_run

pytestmark = pytest.mark.runtime

# Trains the same model twice in one process, without and with every kind of annotation, and
# prints the losses and the compile/execute counts of each pass.
SCRIPT = r"""
import json, sys
import torch, torch_xla
import torch_xla.debug.metrics as met
import xlaprof

def train(annotated: bool):
    torch.manual_seed(0)
    device = torch_xla.device()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    model = model.to(device)
    handle = xlaprof.annotate_module(model, "mlp") if annotated else None
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = [torch.randn(4, 8) for _ in range(5)]
    losses = []
    count = lambda name: (met.metric_data(name) or (0,))[0]
    before = count("CompileTime"), count("ExecuteTime")
    loader = xlaprof.steps(data) if annotated else data
    for x in loader:
        if annotated:
            with xlaprof.region("forward"):
                loss = model(x.to(device)).pow(2).mean()
            with xlaprof.region("backward"):
                loss.backward()
        else:
            loss = model(x.to(device)).pow(2).mean()
            loss.backward()
        opt.step(); opt.zero_grad()
        torch_xla.sync()
        losses.append(loss)
    values = [l.item() for l in losses]
    after = count("CompileTime"), count("ExecuteTime")
    if handle is not None:
        handle.remove()
        assert all("forward" not in m.__dict__ for m in model.modules())
    return values, after[0] - before[0], after[1] - before[1]

out = sys.argv[1]
with xlaprof.profile(out=out, trace_steps=(0, 10)) as session:
    plain = train(False)
    annotated = train(True)
print(json.dumps({"plain": plain, "annotated": annotated}))
"""


@pytest.fixture(scope="module")
def outcome(tmp_path_factory) -> tuple[dict, Path]:
    workdir = tmp_path_factory.mktemp("annotations")
    script = workdir / "train.py"
    script.write_text(SCRIPT)
    out = workdir / "run"
    result = subprocess.run(
        [sys.executable, str(script), str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={**os.environ, "PJRT_DEVICE": "CPU"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), out


def test_annotations_change_neither_results_nor_compiles(outcome) -> None:
    numbers, _out = outcome
    plain_losses, plain_compiles, plain_executions = numbers["plain"]
    losses, compiles, executions = numbers["annotated"]
    assert losses == plain_losses  # bit-identical
    # The annotated pass reuses the plain pass's graphs: no new compilation at all, and no
    # extra execution (an added sync or graph cut would show here).
    assert compiles == 0 and plain_compiles >= 1
    assert executions == plain_executions


def test_regions_and_steps_are_recorded_and_traced(outcome) -> None:
    _numbers, out = outcome
    run = load_run(out)
    regions = run.regions_frame()
    names = set(regions["name"])
    assert {"forward", "backward", "mlp", "0", "1", "2"} <= names
    forward = regions[regions["name"] == "forward"]
    assert forward["calls"].sum() == 5 and (forward["seconds"] > 0).all()
    # steps: five plain steps end at syncs, then xlaprof.steps numbers the annotated ones 0..4
    assert list(run.steps()["step"]) == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]
    (trace,) = run.path.glob("plugins/profile/*/*.trace.json.gz")
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    traced = {e.get("name") for e in events}
    assert {"forward", "backward", "mlp", "train_step"} <= traced


def test_trace_dataframe_steps_and_regions_match_the_script(outcome) -> None:
    _numbers, out = outcome
    events = load_trace(out).events
    # xlaprof.steps numbered the annotated steps 0..4: the trace's step events say so
    steps = events[events["name"] == "train_step"]
    assert sorted(steps["step_num"].tolist()) == [0, 1, 2, 3, 4]
    # each annotated step holds exactly one forward and one backward region, in order
    for region in ("forward", "backward", "mlp"):
        rows = events[events["name"] == region]
        assert sorted(rows["step"].tolist()) == [0, 1, 2, 3, 4], region
    forward = events[events["name"] == "forward"].set_index("step")["start_ns"]
    backward = events[events["name"] == "backward"].set_index("step")["start_ns"]
    assert (forward < backward).all()


def test_region_is_free_when_off() -> None:
    # No session and no XLAPROF_ANNOTATE: nothing is imported, nothing recorded.
    code = (
        "import sys, xlaprof\n"
        "with xlaprof.region('x'):\n    pass\n"
        "@xlaprof.region('f')\ndef f(a):\n    return a + 1\n"
        "assert f(1) == 2\n"
        "print('torch_xla' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert result.stdout.strip() == "False", result.stderr
