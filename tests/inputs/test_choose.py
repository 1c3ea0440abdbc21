"""Which run of a folder commands read (``xlaprof.inputs.choose``): runs told apart, the latest
by its recorded start time, never by folder name or PID."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from builders import copy_run

from xlaprof.errors import RunDirError
from xlaprof.inputs.choose import choose, runs_of
from xlaprof.inputs.paths import load_parts


def _process(folder: Path, name: str, started: float, ended: float, launch: str | None) -> None:
    """A copy of a sample run as process folder ``name``, started and ended when given."""
    target = copy_run(folder / f"tmp-{name}")
    info = json.loads((target / "run.json").read_text())
    info["started"], info["ended"] = started, ended
    info["env"] = {k: v for k, v in info.get("env", {}).items() if k != "XLAPROF_LAUNCH_ID"}
    if launch is not None:
        info["env"]["XLAPROF_LAUNCH_ID"] = launch
    (target / "run.json").write_text(json.dumps(info))
    shutil.move(target, folder / "out" / name)
    shutil.rmtree(folder / f"tmp-{name}", ignore_errors=True)


@pytest.mark.parametrize("launched", [True, False])
def test_the_latest_run_is_read_whatever_its_folder_sorts_as(
    tmp_path: Path, launched: bool
) -> None:
    # GIVEN two ranks of a first run (100..110 s) and one process of a re-run (200..210 s),
    # the re-run's folder named to sort first (a smaller PID), with launch ids or without
    (tmp_path / "out").mkdir()
    _process(tmp_path, "vm-9", 100.0, 110.0, "a" if launched else None)
    _process(tmp_path, "vm-10", 101.0, 109.0, "a" if launched else None)
    _process(tmp_path, "vm-1", 200.0, 210.0, "b" if launched else None)
    parts = load_parts([tmp_path / "out"], 1 << 30)
    # WHEN the runs are told apart and one is chosen
    runs = runs_of(parts)
    chosen = choose(parts, None, "out")
    # THEN the two ranks are one run, the re-run another, and the re-run is read, with a note
    assert sorted(sorted(p.name for p in run) for run in runs) == [["vm-1"], ["vm-10", "vm-9"]]
    assert [p.name for p in chosen.parts] == ["vm-1"]
    (note,) = chosen.notes
    assert "holds 2 runs: reading the latest" in note and "vm-9" in note and "vm-10" in note
    # AND a named process is read whichever run holds it; '*' reads every one
    assert [p.name for p in choose(parts, "vm-9", "out").parts] == ["vm-9"]
    assert len(choose(parts, "*", "out").parts) == 3
    with pytest.raises(RunDirError, match="no process run named 'vm-2'"):
        choose(parts, "vm-2", "out")
