"""The Python facade (``xlaprof.Analysis``, ``xlaprof.check``, ``xlaprof.analyze``): what a
notebook or a user's own test calls."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from builders import copy_run


def test_the_facade_says_which_process_it_keeps(tmp_path: Path) -> None:
    import xlaprof

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
