"""Findings with source frames switched per step are the same as with frames always on.

Run: python benchmarks/frames_findings.py [--compare frames|debug-level] [--corpus] [SCRIPT ...]
     (PJRT_DEVICE=CPU is set here)

`xlaprof run` turns IR debug (per-op Python stacks, which give graphs their source lines) on
through warm-up, off once compiles stay flat, and back on after a compile while off. This runs
every example (``examples/*.py``) and the scenarios below twice, once with
``XLAPROF_SOURCE_FRAMES=always`` (IR debug throughout) and once with the default, and compares
``xlaprof analyze --json``: each finding's kind, location and title (timings and percentages
masked, since they differ between any two runs) and the evidence that source lines feed (what
changed, the repeated block's lines, the layer stack). The location of a tracing-bound finding
is the line where the host sampler saw the most CPU, a timing, so it is not compared. Exit
status 1 if any script differs.

``--compare debug-level`` compares the default (``PT_XLA_DEBUG_LEVEL=2``: torch_xla analyses
every compilation and every execution) with ``--debug-level 1`` (compilations only), which
would save torch_xla's per-execution analysis, the largest part of what profiling costs a
tracing-bound step: it shows which findings depend on the execution records. ``--corpus`` adds
the corpus scripts (``examples/corpus``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
# Evidence fields that come from graphs' source lines.
FRAME_EVIDENCE = ("what_changed", "first_difference", "block_source_lines", "layer_stack")
# Findings located by the host sampler (the line that used the most CPU): which of two close
# lines wins moves between any two runs, and IR debug itself adds CPU to op-heavy lines.
TIMED_LOCATIONS = ("tracing_bound",)
# What each comparison runs: name -> ((label, XLAPROF_SOURCE_FRAMES, xlaprof run options) x 2).
Mode = tuple[str, str, list[str]]
COMPARISONS: dict[str, tuple[Mode, Mode]] = {
    "frames": (("frames always", "always", []), ("frames auto", "auto", [])),
    "debug-level": (("level 2", "auto", []), ("level 1", "auto", ["--debug-level", "1"])),
}
# Corpus helpers that are not training scripts.
_CORPUS_TOOLS = ("judge.py", "measure_truth.py")
# Timings and shares of time differ between any two runs: masked in titles and evidence.
_DECIMAL = re.compile(r"\d+\.\d+|\d+%")

# A job that is steady long enough for IR debug to go off, then changes its batch size (a new
# graph compiled while off), then keeps changing it: the recompilation must still be explained.
LATE_RECOMPILE = """
import torch, torch_xla
from torch import nn

def main():
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(24):
        batch = 32 if step < 12 else 32 + 8 * (step % 4)
        x = torch.randn(batch, 64).to(device)
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print("final", loss.item())

main()
"""
# A new graph that appears only once, long after warm-up (an evaluation pass).
LATE_NEW_GRAPH = """
import torch, torch_xla
from torch import nn

def main():
    device = torch_xla.device()
    model = nn.Sequential(*[nn.Linear(64, 64) for _ in range(6)]).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 64).to(device)
    for step in range(16):
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
        if step == 10:
            with torch.no_grad():
                score = model(x * 2).abs().mean()
            torch_xla.sync()
    print("final", loss.item(), score.item())

main()
"""
SCENARIOS = {"late_recompile.py": LATE_RECOMPILE, "late_new_graph.py": LATE_NEW_GRAPH}


def scripts(scenario_dir: Path, corpus: bool = False) -> list[Path]:
    """Every example script, then the scenarios written into ``scenario_dir``, then (with
    ``corpus``) the corpus scripts."""
    found = sorted(
        p
        for p in EXAMPLES.glob("*.py")
        if not p.name.startswith("_") and p.name != "bench_targets.py"
    )
    for name, text in SCENARIOS.items():
        path = scenario_dir / name
        path.write_text(text)
        found.append(path)
    if corpus:
        found += sorted(
            p for p in (EXAMPLES / "corpus").glob("*.py") if p.name not in _CORPUS_TOOLS
        )
    return found


def findings(script: Path, mode: Mode, out: Path) -> list[dict[str, object]]:
    """``xlaprof run`` the script in the given mode; its findings, comparable."""
    label, frames, options = mode
    env = {**os.environ, "PJRT_DEVICE": "CPU", "XLAPROF_SOURCE_FRAMES": frames}
    run = [sys.executable, "-m", "xlaprof", "run", "-q", *options, "--out", str(out), "--"]
    done = subprocess.run(
        [*run, sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=script.parent,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script.name} ({label}) failed: {done.stderr[-1500:]}")
    analyzed = subprocess.run(
        [sys.executable, "-m", "xlaprof", "analyze", "--json", str(out)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return [comparable(f) for f in json.loads(analyzed.stdout)["findings"]]


def comparable(finding: dict[str, object]) -> dict[str, object]:
    """The parts of a finding that must not depend on the frames mode (timings masked)."""
    evidence = finding.get("evidence") or {}
    assert isinstance(evidence, dict)
    timed = finding["kind"] in TIMED_LOCATIONS
    return {
        "kind": finding["kind"],
        "location": "(where host CPU went: not compared)" if timed else finding.get("location"),
        "title": _DECIMAL.sub("#", str(finding["title"])),
        **{key: _mask(evidence[key]) for key in FRAME_EVIDENCE if key in evidence},
    }


def _mask(value: object) -> object:
    return json.loads(_DECIMAL.sub("#", json.dumps(value))) if value is not None else None


def compare(
    script: Path, root: Path, comparison: str = "frames"
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The script's comparable findings in the comparison's two modes, in its order."""
    first, second = COMPARISONS[comparison]
    return (
        findings(script, first, root / f"{script.stem}-a"),
        findings(script, second, root / f"{script.stem}-b"),
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="frames")
    parser.add_argument("--corpus", action="store_true", help="also the corpus scripts")
    parser.add_argument("scripts", nargs="*", type=Path, help="default: every example")
    args = parser.parse_args(argv)
    first, second = COMPARISONS[args.compare]
    differing = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        chosen = [p.resolve() for p in args.scripts] or scripts(root, args.corpus)
        for index, script in enumerate(chosen):
            # Examples and corpus scripts share names (device_bound_matmul.py): one folder each.
            a, b = compare(script, root / str(index), args.compare)
            same = a == b
            differing += not same
            kinds = ", ".join(str(f["kind"]) for f in b) or "no findings"
            print(f"{'same' if same else 'DIFFERENT':9s} {script.name:28s} {kinds}")
            if not same:
                print(f"   {first[0]}: {json.dumps(a)}\n   {second[0]}: {json.dumps(b)}")
    print(f"{len(chosen) - differing}/{len(chosen)} scripts: the same findings in both modes")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
