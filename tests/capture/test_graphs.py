"""Source frames only while compiles happen (``xlaprof.capture.graphs``), on the real CPU
runtime: IR debug switched between steps does not recompile, graphs traced while it is on carry
the user's lines, and the per-step scheme gives the same findings as frames always on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, timeless_findings

pytest.importorskip("torch_xla")
sys.path.insert(0, str(REPO / "benchmarks"))
import frames_findings

RUNTIME_ENV = {"PJRT_DEVICE": "CPU"}

TOGGLE = r"""
import glob, json, os, re, sys
out, mode = sys.argv[1], sys.argv[2]
os.environ["XLA_HLO_DEBUG"] = "1"
os.environ["XLA_FLAGS"] = f"--xla_dump_to={out} --xla_dump_hlo_as_text"
import torch, torch_xla
from xlaprof.capture.graphs import SourceFrames
xlac = torch_xla._XLAC

def compiles():
    data = xlac._xla_metric_data("CompileTime")
    return 0 if data is None else int(data[0])

frames = SourceFrames(xlac, "auto", flat_steps=2)
w = torch.randn(16, 16, device=torch_xla.device())
log = []
for step, rows in enumerate([4, 4, 4, 4, 4, 4, 8, 8, 8]):
    before = compiles()
    x = torch.ones(rows, 16, device=torch_xla.device())  # A-NEW-NODE-EACH-SHAPE
    y = torch.tanh(x @ w).sum()
    torch_xla.sync()
    made = compiles() - before
    on = frames.step(made) if mode == "toggle" else True
    log.append({"step": step, "compiles": made, "frames_on": on,
                "ir_debug_now": bool(xlac._get_ir_debug())})
frames.close()
modules = sorted(glob.glob(f"{out}/module_*.before_optimizations.txt"))
lines = [sorted(set(map(int, re.findall(r'source_line=(\d+)', open(m).read())))) for m in modules]
print(json.dumps({"log": log, "lines": lines, "switches": frames.switches,
                  "initial": frames.initial, "restored": bool(xlac._get_ir_debug())}))
"""


def _toggle(tmp_path: Path, mode: str) -> dict:
    script = tmp_path / "toggle.py"
    script.write_text(TOGGLE)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / mode), mode],
        capture_output=True,
        text=True,
        env={**os.environ, **RUNTIME_ENV, "PYTHONPATH": str(REPO)},
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_ir_debug_switches_between_steps_without_recompiling(tmp_path: Path) -> None:
    # GIVEN a loop whose shapes are steady for six steps, then change once (at step 6)
    user_line = 1 + next(i for i, x in enumerate(TOGGLE.splitlines()) if "A-NEW-NODE" in x)
    # WHEN SourceFrames switches IR debug at each step (off after 2 steps without a compile),
    # and, for reference, when IR debug stays on
    toggled, constant = _toggle(tmp_path, "toggle"), _toggle(tmp_path, "constant")
    log = toggled["log"]
    # THEN switching compiles nothing: every step compiles what it compiles with IR debug on
    assert [e["compiles"] for e in log] == [e["compiles"] for e in constant["log"]]
    assert log[6]["compiles"] == 1 and not any(e["compiles"] for e in log[2:6])
    # ... it is on through warm-up and goes off once compiles stay flat for 2 steps
    warm = max(i for i, e in enumerate(log[:6]) if e["compiles"])
    assert all(e["frames_on"] for e in log[: warm + 3])
    assert log[warm + 2]["ir_debug_now"] is False and log[warm + 3]["frames_on"] is False
    # ... a compile while off turns it back on for the steps after
    assert log[6]["frames_on"] is False and log[6]["ir_debug_now"] is True
    assert log[7]["frames_on"] is True
    # ... graphs traced while on carry the user's line; the one traced while off does not
    # (nodes torch_xla reuses from earlier traces keep theirs: a new shape's are new)
    assert user_line in toggled["lines"][0] and user_line in constant["lines"][-1]
    assert user_line not in toggled["lines"][-1]
    # ... and closing puts IR debug back as it was before the session (XLA_HLO_DEBUG=1 at
    # import turns it on in torch_xla 2.9)
    assert toggled["restored"] is toggled["initial"] and toggled["switches"] == 3


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[list, list, Path]]:
    """Each scenario run twice, once a module: with frames always on, and with the default
    per-step scheme (XLAPROF_SOURCE_FRAMES=auto); each one's comparable findings, and the run
    directory of the default one."""
    results = {}
    for scenario, text in sorted(frames_findings.SCENARIOS.items()):
        root = tmp_path_factory.mktemp(scenario.removesuffix(".py"))
        script = root / scenario
        script.write_text(text)
        always, auto = frames_findings.compare(script, root)
        results[scenario] = (always, auto, root / f"{script.stem}-b")
    return results


@pytest.mark.parametrize("scenario", sorted(frames_findings.SCENARIOS))
def test_findings_are_the_same_as_with_frames_always_on(
    compared: dict[str, tuple[list, list, Path]], scenario: str
) -> None:
    # GIVEN a job that goes steady (IR debug goes off), then compiles new graphs late
    # WHEN it runs with frames always on and with the default per-step scheme
    always, auto, _run = compared[scenario]
    # THEN the findings agree in kind, location, title and source-line evidence. Kinds whose
    # verdict is a duration measured in each run (helpers.TIMED_KINDS) are left out: two runs
    # of one script on a busy machine may fall either side of their thresholds.
    assert timeless_findings(always) == timeless_findings(auto)
    if scenario == "late_recompile.py":
        (recompilation,) = [f for f in auto if f["kind"] == "recompilation"]
        assert recompilation["what_changed"]  # explained, the same way, in both modes


def test_graph_index_says_which_graphs_have_source_lines(
    compared: dict[str, tuple[list, list, Path]],
) -> None:
    # GIVEN the late-recompile scenario under the default xlaprof run (the per-step scheme)
    _always, _auto, out = compared["late_recompile.py"]
    # THEN every graph's index entry records whether IR debug was on when it was traced
    (index,) = out.glob("*/graphs/index.jsonl")
    entries = [json.loads(line) for line in index.read_text().splitlines()]
    steps = [json.loads(line) for line in next(out.glob("*/steps.jsonl")).read_text().splitlines()]
    compile_steps = [row["step"] for row in steps if row["compiles"]]
    by_step = {e["step"]: e["source_lines"] for e in entries}
    # warm-up graphs have lines; the first new shape after 12 steady steps was traced without
    assert by_step[compile_steps[0]] is True
    late = [s for s in compile_steps if s >= 12]
    assert late and by_step[late[0]] is False
    assert all(by_step[s] is True for s in late[1:])  # back on after that compile
    # and each kept graph's HloProto is kept beside its text: a graph traced with IR debug on
    # gives its ops their whole Python stack, down to this script's lines
    assert all(e.get("proto") for e in entries if e.get("file"))
    from xlaprof.rundir.reader import load_run

    script = out.parent / "late_recompile.py"
    graphs = load_run(index.parent.parent).graphs()
    first = next(g for g in graphs if g.step == compile_steps[0] and g.hlo is not None)
    stacks = [i.stack for i in first.hlo.instructions if i.stack]
    assert stacks and any(frame.file == str(script) for stack in stacks for frame in stack)
