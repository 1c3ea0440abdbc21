"""The whole corpus (examples/corpus) under `xlaprof run`: right/wrong per pattern.

Run: python benchmarks/corpus.py [SCRIPT ...] [--out DIR]   (PJRT_DEVICE=CPU is set here)

Each script is profiled with `xlaprof run`, analyzed with `analyze --json`, and judged against
examples/corpus/corpus.toml (examples/corpus/judge.py: expected findings at the marked lines,
no control fires, one step per training iteration, compile count as in the bare runtime).
tests/corpus/test_corpus.py runs only the scripts marked fast; this runs them all (about 20 to
100 s a script on a shared 2-core machine). Prints one line per script and writes corpus.json in
--out.
benchmarks/realcode.py runs the real-code corpus (examples/realcode) through the same table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES / "corpus"))
import judge  # noqa: E402


def main(corpus: Path = EXAMPLES / "corpus", description: str | None = None) -> None:
    parser = argparse.ArgumentParser(description=description or __doc__)
    parser.add_argument("scripts", nargs="*", help="corpus script names (default: all)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    manifest = judge.manifest(corpus)
    names = args.scripts or sorted(manifest)
    out = args.out or Path(tempfile.mkdtemp(prefix=f"xlaprof-{corpus.name}-"))
    results = {}
    for name in names:
        began = time.perf_counter()
        try:
            document = judge.profile(name, out / name, corpus=corpus)
            steps = judge.steps_recorded(out / name)
            wrong = judge.problems(name, document, steps, corpus=corpus, out=out / name)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            wrong = [f"did not run: {error}"]  # a timeout on a loaded machine, not a crash
        seconds = time.perf_counter() - began
        results[name] = {"right": not wrong, "problems": wrong, "seconds": round(seconds, 1)}
        verdict = "right" if not wrong else "WRONG"
        print(f"{verdict:5} {name:30} {seconds:6.1f}s  {manifest[name]['pattern']}", flush=True)
        for problem in wrong:
            print(f"      - {problem}", flush=True)
    right = sum(r["right"] for r in results.values())
    print(f"{right} right, {len(results) - right} wrong of {len(results)} scripts; runs in {out}")
    (out / f"{corpus.name}.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
