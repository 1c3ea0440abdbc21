"""Compare xlaprof's findings on a corpus script with the manifest (corpus.toml).

Used by tests/corpus/test_corpus.py (the fast scripts) and benchmarks/corpus.py (all of them),
and by tests/corpus/test_realcode.py and benchmarks/realcode.py for the real-code corpus
(examples/realcode): every function takes the corpus folder, ``corpus=``, this folder when left
out. A script is
right when every expected kind is found exactly once, at the line the script marks
``# expect: <kind>`` (one line may name several kinds: ``# expect: host_sync, aten_fallback``);
no control kind is found; xlaprof counted one step per training iteration; and the run compiled
as often as the bare runtime did (profiling changed nothing).

Optional manifest keys, used by the real-code corpus (absent: not judged):

- ``run``: how the script is profiled. ``"xlaprof"`` (default): ``xlaprof run -- python
  SCRIPT``. ``"profile"``: plain ``python SCRIPT``, the script entering ``xlaprof.profile()``
  itself into the folder named by ``$REALCODE_PROFILE_OUT``. ``"log"``: the script runs bare
  (with the manifest's ``env``, e.g. ``PT_XLA_DEBUG = "1"``); only the output lines containing
  ``log_keep`` are kept (what a user pastes) and ``xlaprof analyze`` reads that file, whose
  compile count is unknown (``None``).
- ``env``: extra environment for the profiled process; ``{out}`` is the run's output folder.
- ``unlocated``: expected kinds whose source line nothing in the input can know (a pasted log
  without frames): found exactly once, any location.
- ``fix_contains`` / ``fix_excludes``: ``{kind = [text, ...]}``: the kind's fix text must
  contain / must not contain each text (a fix that cannot work for the code seen).
- ``title_excludes``: texts no finding's title or fix may contain (``"None"`` placeholders).
- ``nonempty``: folders under the run's output folder that must hold files afterwards (a
  user's own ``--xla_dump_to``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent
MANIFEST = CORPUS / "corpus.toml"
PROFILE_OUT_VARIABLE = "REALCODE_PROFILE_OUT"


def manifest(corpus: Path = CORPUS) -> dict[str, dict[str, Any]]:
    return tomllib.loads((corpus / "corpus.toml").read_text())


def marked_line(script: str, kind: str, corpus: Path = CORPUS) -> int:
    """The 1-based line of ``script`` marked ``# expect: <kind>`` (alone or among others)."""
    lines = (corpus / f"{script}.py").read_text().splitlines()
    for number, text in enumerate(lines, start=1):
        marker = re.search(r"# expect: ([\w, ]+)$", text.rstrip())
        if marker and kind in {k.strip() for k in marker.group(1).split(",")}:
            return number
    raise LookupError(f"{script}.py marks no line `# expect: {kind}`")


def marked_lines(script: str, kind: str, corpus: Path = CORPUS) -> list[int]:
    """Every 1-based line of ``script`` marked ``# expect: <kind>``: a kind true at two lines
    (a read in the training loop and one in the evaluation loop) is expected once at each."""
    lines = (corpus / f"{script}.py").read_text().splitlines()
    found = []
    for number, text in enumerate(lines, start=1):
        marker = re.search(r"# expect: ([\w, ]+)$", text.rstrip())
        if marker and kind in {k.strip() for k in marker.group(1).split(",")}:
            found.append(number)
    return found


def _environment(entry: dict[str, Any], out: Path) -> dict[str, str]:
    env = {**os.environ, "PJRT_DEVICE": "CPU", "HF_HUB_OFFLINE": "1"}
    for name, value in entry.get("env", {}).items():
        env[name] = value.replace("{out}", str(out))
    return env


def profile(script: str, out: Path, timeout: float = 600, corpus: Path = CORPUS) -> dict[str, Any]:
    """Profile ``script`` into ``out`` as its manifest entry says; return ``analyze --json``."""
    target = record(script, out, timeout, corpus)
    analysis = subprocess.run(
        [sys.executable, "-m", "xlaprof", "analyze", "--json", str(target)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if analysis.returncode != 0:
        raise RuntimeError(f"{script}: analyze exited {analysis.returncode}: {analysis.stderr}")
    return json.loads(analysis.stdout)


def record(script: str, out: Path, timeout: float = 600, corpus: Path = CORPUS) -> Path:
    """Run ``script`` into ``out`` as its manifest entry says (under ``xlaprof run``, with
    ``xlaprof.profile()`` inside, or bare with its log pasted to a file); return what
    ``xlaprof analyze`` is to be given: the run folder, or the pasted log."""
    entry = manifest(corpus)[script]
    mode = entry.get("run", "xlaprof")
    python = sys.executable
    path = str(corpus / f"{script}.py")
    out.mkdir(parents=True, exist_ok=True)
    env = _environment(entry, out)
    if mode == "xlaprof":
        command = [python, "-m", "xlaprof", "run", "-q", "--out", str(out), "--", python, path]
    elif mode == "profile":
        command = [python, path]
        env[PROFILE_OUT_VARIABLE] = str(out)
    elif mode == "log":
        command = [python, path]
    else:
        raise ValueError(f"{script}: unknown run mode {mode!r}")
    run = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    if run.returncode != 0:
        raise RuntimeError(f"{script}: {mode} run exited {run.returncode}: {run.stderr[-2000:]}")
    if mode != "log":
        return out
    keep = entry["log_keep"]
    pasted = [line for line in (run.stdout + run.stderr).splitlines() if keep in line]
    if not pasted:
        raise RuntimeError(f"{script}: the bare run printed no line containing {keep!r}")
    target = out / "pasted.log"
    target.write_text("\n".join(pasted) + "\n")
    return target


def problems(
    script: str,
    document: dict[str, Any],
    steps: int | None,
    corpus: Path = CORPUS,
    out: Path | None = None,
    timed: tuple[str, ...] = (),
) -> list[str]:
    """What is wrong with xlaprof's account of ``script`` (empty: right).

    ``timed``: finding kinds whose verdict is a duration measured on the machine that ran the
    script (the tests pass them: a run made during the tests gets those verdicts or not with how
    busy the machine is). An expected one that is missing is then no problem, one that is there
    is still judged on its line and its fix, and a control of such a kind is not judged.
    """
    entry = manifest(corpus)[script]
    findings = document["findings"]
    wrong = _expected_problems(script, entry, findings, corpus, timed)
    for kind in entry["none"]:
        if kind in timed:
            continue
        found = [f["title"] for f in findings if f["kind"] == kind]
        if found:
            wrong.append(f"control {kind} got {len(found)}: {found[0][:120]}")
    for text in entry.get("title_excludes", []):
        said = [f for f in findings if text in f["title"] or text in (f.get("suggestion") or "")]
        if said:
            wrong.append(f"{said[0]['kind']} says {text!r}: {said[0]['title'][:100]}")
    if steps is not None and steps != entry["iterations"]:
        wrong.append(f"{steps} steps recorded for {entry['iterations']} training iterations")
    compiles = document["summary"]["compiles"]
    # A pasted log of fallback lines holds no compile count: xlaprof must not invent one.
    expected = None if entry.get("run") == "log" else entry["bare"]["compiles"]
    if compiles != expected:
        wrong.append(f"{compiles} compilations under xlaprof, {expected} bare")
    for folder in entry.get("nonempty", []):
        if out is not None and not any((out / folder).glob("*")):
            wrong.append(f"{folder}/ is empty: the script's own setting was lost")
    return wrong


def _expected_problems(
    script: str,
    entry: dict[str, Any],
    findings: list[dict[str, Any]],
    corpus: Path,
    timed: tuple[str, ...],
) -> list[str]:
    """What is wrong with the findings the manifest expects: one each, at its marked line."""
    wrong = []
    for kind in entry["expect"]:
        found = [f for f in findings if f["kind"] == kind]
        if kind in timed and not found:
            continue
        lines = [] if kind in entry.get("unlocated", []) else marked_lines(script, kind, corpus)
        if len(lines) > 1:
            wrong.extend(_at_each_line(script, kind, lines, found))
            continue
        if len(found) != 1:
            wrong.append(f"expected one {kind} finding, got {len(found)}")
            continue
        wrong.extend(_fix_problems(entry, kind, found[0]))
        if kind in entry.get("unlocated", []):
            continue
        line = marked_line(script, kind, corpus)
        location = found[0]["location"]
        if location is None or not location["file"].endswith(f"{script}.py"):
            wrong.append(f"{kind}: located at {_where(location)}, expected line {line}")
        elif location["line"] != line:
            wrong.append(f"{kind}: at line {location['line']}, expected line {line}")
    return wrong


def _at_each_line(
    script: str, kind: str, lines: list[int], found: list[dict[str, Any]]
) -> list[str]:
    """What is wrong with the findings of a kind the script marks at several lines: one each."""
    at = sorted(
        f["location"]["line"]
        for f in found
        if f["location"] is not None and f["location"]["file"].endswith(f"{script}.py")
    )
    if at != lines or len(found) != len(lines):
        return [f"expected one {kind} finding at each of lines {lines}, got {at or len(found)}"]
    return []


def _fix_problems(entry: dict[str, Any], kind: str, finding: dict[str, Any]) -> list[str]:
    fix = finding.get("suggestion") or ""
    wrong = []
    for text in entry.get("fix_contains", {}).get(kind, []):
        if text not in fix:
            wrong.append(f"{kind}: fix text never says {text!r}")
    for text in entry.get("fix_excludes", {}).get(kind, []):
        if text in fix:
            wrong.append(f"{kind}: fix text says {text!r}, which does not apply here")
    return wrong


def _where(location: dict[str, Any] | None) -> str:
    if location is None:
        return "no line"
    return f"{location['file']}:{location['line']}"


def steps_recorded(out: Path) -> int | None:
    runs = sorted(out.glob("*/run.json"))
    if len(runs) != 1:
        return None
    return json.loads(runs[0].read_text()).get("steps_recorded")
