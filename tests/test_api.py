"""The Python facade (``xlaprof.Analysis``, ``xlaprof.check``, ``xlaprof.analyze``): what a
notebook or a user's own test calls."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from builders import copy_run
from helpers import SAMPLES

import xlaprof


def test_the_facade_says_which_process_it_keeps(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    for rank in (0, 1):
        target = copy_run(tmp_path / f"r{rank}")
        info = json.loads((target / "run.json").read_text())
        info["rank"] = rank
        (target / "run.json").write_text(json.dumps(info))
        shutil.move(target, tmp_path / "job" / f"proc{rank}")
    with pytest.warns(UserWarning, match=r"2 process runs \(proc0, proc1\): showing proc0 only"):
        analysis = xlaprof.Analysis(tmp_path / "job")
    assert analysis.processes == ["proc0", "proc1"]


def test_facade_tables_and_figures() -> None:
    analysis = xlaprof.Analysis(SAMPLES / "runs" / "recompile_varying_batch")
    assert list(analysis.findings()["kind"]) == ["recompilation"]
    assert len(analysis.steps()) == 12 and len(analysis.timeline()) == 12
    assert list(analysis.compiles()["step"])[:2] == [0, 1]
    timeline = analysis.plot_timeline()
    names = [trace.name for trace in timeline.data]
    assert {"compile", "Python + tracing", "device busy", "step wall time"} <= set(names)
    compile_bar = next(t for t in timeline.data if t.name == "compile")
    assert list(compile_bar.x) == list(range(12)) and max(compile_bar.y) > 100  # ms
    # a CPU capture has no device planes: its device is the CPU executor's XLA ops
    device = analysis.plot_device_ops()
    shown = {name for bar in device.data for name in bar.y}
    ops = analysis.device_ops()
    assert set(ops["device"]) == {"CPU"} and shown <= set(ops["name"]) and shown


def test_compare_says_plainly_what_got_worse() -> None:
    before = xlaprof.Analysis(SAMPLES / "runs" / "unrolled_layers")
    after = xlaprof.Analysis(SAMPLES / "runs" / "scanned_layers")
    table = before.compare(after).set_index("metric")
    ops = table.loc["largest graph (ops)"]
    assert ops["after"] < ops["before"] and "better" in ops["change"]
    for _, row in table.dropna(subset=["ratio"]).iterrows():
        assert ("worse" in row["change"]) == (row["ratio"] > 1.02)
    figure = before.plot_compare(after)
    assert list(figure.data[0].y) == list(table.dropna(subset=["ratio"]).index)
