"""The real-code corpus (examples/realcode): training set-ups whose model and training code come
from real libraries (transformers, torchvision, timm, accelerate) or reproduce, in our own
words, public training code that xlaprof got wrong, judged against examples/realcode/corpus.toml
by the corpus judge (examples/corpus/judge.py).

The manifest's expectations come from what is true of each set-up and from the bare runtime's
measurements (examples/corpus/measure_truth.py), never from xlaprof's output. Only the set-ups
marked ``fast`` run here, two at a time; benchmarks/realcode.py runs them all.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import EXAMPLES, TIMED_KINDS, recorded_and_analyzed

REALCODE = EXAMPLES / "realcode"
sys.path.insert(0, str(EXAMPLES / "corpus"))
import judge  # noqa: E402

pytest.importorskip("torch_xla")
pytest.importorskip("transformers")

MANIFEST = judge.manifest(REALCODE)
FAST = sorted(name for name, entry in MANIFEST.items() if entry["fast"])
KINDS = {
    "recompilation",
    "host_sync",
    "aten_fallback",
    "unrolled_loop",
    "graph_break",
    "tracing_bound",
    "eager_mode",
}


@pytest.fixture(scope="module")
def realcode_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each fast set-up profiled once: its ``analyze --json`` document, steps recorded and
    folder."""

    def record(name: str, out: Path) -> Path:
        return judge.record(name, out, corpus=REALCODE)

    runs = recorded_and_analyzed(record, FAST, tmp_path_factory.mktemp("realcode"))
    return {
        name: done
        if isinstance(done, Exception)
        else (done[0], judge.steps_recorded(done[1]), done[1])
        for name, done in runs.items()
    }


def test_the_manifest_is_complete() -> None:
    # GIVEN the real-code manifest WHEN it is read THEN it covers at least 12 set-ups, each on
    # disk, each expected kind marked on a line, controls and expectations never overlap, every
    # kind is one xlaprof reports (or eager_mode, which issue 29 asks for), and the bare
    # runtime compiled at least once
    assert len(MANIFEST) >= 12
    assert len(FAST) >= 4
    for name, entry in MANIFEST.items():
        assert (REALCODE / f"{name}.py").is_file(), name
        assert not set(entry["expect"]) & set(entry["none"]), name
        assert set(entry["expect"]) | set(entry["none"]) <= KINDS, name
        for kind in entry["expect"]:
            if kind not in entry.get("unlocated", []):
                judge.marked_line(name, kind, REALCODE)
        assert entry["bare"]["compiles"] >= 1, name


@pytest.mark.parametrize("name", FAST)
def test_realcode_setup(realcode_runs: dict[str, Any], name: str) -> None:
    # GIVEN training code built on a real library (or a public pattern in our words) WHEN it is
    # profiled as its manifest says and analyzed THEN every expected finding is there once at
    # the marked line with a fix that applies, no control fires, one step is one training
    # iteration and xlaprof's compile count is the bare runtime's. Kinds judged on durations
    # this machine measured (helpers.TIMED_KINDS: tracing_bound_compiled expects one) are
    # judged on their line and fix where found; their verdicts are tested on fixed inputs.
    result = realcode_runs[name]
    if isinstance(result, Exception):
        raise result
    document, steps, out = result
    assert judge.problems(name, document, steps, REALCODE, out, timed=TIMED_KINDS) == []
