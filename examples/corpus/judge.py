"""Compare xlaprof's findings on a corpus script with the manifest (corpus.toml).

Used by tests/test_corpus.py (the fast scripts) and benchmarks/corpus.py (all of them). A
script is right when every expected kind is found exactly once, at the line the script marks
``# expect: <kind>``; no control kind is found; xlaprof counted one step per training iteration;
and the run compiled as often as the bare runtime did (profiling changed nothing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent
MANIFEST = CORPUS / "corpus.toml"


def manifest() -> dict[str, dict[str, Any]]:
    return tomllib.loads(MANIFEST.read_text())


def marked_line(script: str, kind: str) -> int:
    """The 1-based line of ``script`` marked ``# expect: <kind>``."""
    lines = (CORPUS / f"{script}.py").read_text().splitlines()
    for number, text in enumerate(lines, start=1):
        if text.rstrip().endswith(f"# expect: {kind}"):
            return number
    raise LookupError(f"{script}.py marks no line `# expect: {kind}`")


def profile(script: str, out: Path, timeout: float = 600) -> dict[str, Any]:
    """Run ``script`` under ``xlaprof run`` into ``out``; return ``analyze --json`` output."""
    env_python = sys.executable
    run = subprocess.run(
        [
            env_python,
            "-m",
            "xlaprof",
            "run",
            "-q",
            "--out",
            str(out),
            "--",
            env_python,
            str(CORPUS / f"{script}.py"),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PJRT_DEVICE": "CPU"},
    )
    if run.returncode != 0:
        raise RuntimeError(f"{script}: xlaprof run exited {run.returncode}: {run.stderr[-2000:]}")
    analysis = subprocess.run(
        [env_python, "-m", "xlaprof", "analyze", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if analysis.returncode != 0:
        raise RuntimeError(f"{script}: analyze exited {analysis.returncode}: {analysis.stderr}")
    return json.loads(analysis.stdout)


def problems(script: str, document: dict[str, Any], steps: int | None) -> list[str]:
    """What is wrong with xlaprof's account of ``script`` (empty: right)."""
    entry = manifest()[script]
    findings = document["findings"]
    wrong = []
    for kind in entry["expect"]:
        found = [f for f in findings if f["kind"] == kind]
        line = marked_line(script, kind)
        if len(found) != 1:
            wrong.append(f"expected one {kind} finding, got {len(found)}")
            continue
        location = found[0]["location"]
        if location is None or not location["file"].endswith(f"{script}.py"):
            wrong.append(f"{kind}: located at {location}, expected line {line}")
        elif location["line"] != line:
            wrong.append(f"{kind}: at line {location['line']}, expected line {line}")
    for kind in entry["none"]:
        found = [f["title"] for f in findings if f["kind"] == kind]
        if found:
            wrong.append(f"control {kind} got {len(found)}: {found[0][:120]}")
    if steps is not None and steps != entry["iterations"]:
        wrong.append(f"{steps} steps recorded for {entry['iterations']} training iterations")
    compiles = document["summary"]["compiles"]
    if compiles != entry["bare"]["compiles"]:
        wrong.append(f"{compiles} compilations under xlaprof, {entry['bare']['compiles']} bare")
    return wrong


def steps_recorded(out: Path) -> int | None:
    runs = sorted(out.glob("*/run.json"))
    if len(runs) != 1:
        return None
    return json.loads(runs[0].read_text()).get("steps_recorded")
