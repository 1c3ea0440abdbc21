"""The sandbox of ``xlaprof mcp`` (``xlaprof.mcp.roots``): which paths it reads, what it lists.

No MCP SDK here: the roots are plain Python, so these run in milliseconds on folders made for
each test (links, runs, captures and logs copied or linked from the bundled samples).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import SAMPLES

from xlaprof.errors import InputNotFound, OutsideRoots
from xlaprof.mcp.roots import Roots

RUN = SAMPLES / "runs" / "host_sync_item"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A root holding a run folder, a capture logdir, a lone capture, a log and a README."""
    root = tmp_path / "root"
    shutil.copytree(RUN, root / "runs" / "host_sync_item")
    capture = next(RUN.glob("*/plugins/profile/*/vm.xplane.pb"))
    logdir = root / "logdir" / "plugins" / "profile" / "2026_01_01"
    logdir.mkdir(parents=True)
    shutil.copy(capture, logdir / "host.xplane.pb")
    shutil.copy(capture, root / "lone.xplane.pb")
    shutil.copy(SAMPLES / "cpu_fallback.log", root / "job.log")
    (root / "README.txt").write_text("nothing to analyze here\n")
    return root


def test_a_path_outside_the_roots_is_refused(tree: Path) -> None:
    # GIVEN roots holding one folder
    roots = Roots([tree])
    # WHEN paths outside it are named: absolute, climbing out with .., or through a link
    (tree / "out").symlink_to("/etc")
    for name in ("/etc/hostname", "../../../../etc/hostname", "out/hostname", str(tree.parent)):
        # THEN each is refused with the sandbox's error (exit code 24 at the CLI)
        with pytest.raises(OutsideRoots, match="outside the folders this server may read"):
            roots.resolve(name)
    assert OutsideRoots.exit_code == 24


def test_a_folder_holding_a_link_out_of_the_roots_is_refused(tree: Path, tmp_path: Path) -> None:
    # GIVEN a capture folder inside the root whose file is a link to a capture outside it
    outside = tmp_path / "elsewhere.xplane.pb"
    shutil.copy(tree / "lone.xplane.pb", outside)
    (tree / "logdir" / "plugins" / "profile" / "2026_01_01" / "peer.xplane.pb").symlink_to(outside)
    roots = Roots([tree])
    # WHEN the folder (or the folder above it) is named THEN it is refused, naming the link
    for name in ("logdir", str(tree)):
        with pytest.raises(OutsideRoots, match=r"holds a link .*peer\.xplane\.pb"):
            roots.resolve(name)
    # AND a link that stays inside the roots is fine
    (tree / "again.xplane.pb").symlink_to(tree / "lone.xplane.pb")
    assert roots.resolve("again.xplane.pb") == tree / "lone.xplane.pb"


def test_relative_names_are_found_in_any_root_and_missing_ones_say_so(
    tree: Path, tmp_path: Path
) -> None:
    # GIVEN two roots, the second holding a log
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(SAMPLES / "healthy_loop.log", other / "healthy.log")
    roots = Roots([tree, other])
    # WHEN names relative to either are resolved THEN each is found where it is
    assert roots.resolve("job.log") == tree / "job.log"
    assert roots.resolve("healthy.log") == other / "healthy.log"
    # AND a name in neither is "not found" (exit 3), not "outside"
    with pytest.raises(InputNotFound, match="no such file"):
        roots.resolve("missing.log")
    with pytest.raises(InputNotFound, match="no such folder"):
        Roots([tmp_path / "absent"])


def test_the_inventory_lists_runs_captures_logdirs_and_logs_with_sizes(tree: Path) -> None:
    # GIVEN the tree WHEN it is listed
    listed = {
        Path(e.path).relative_to(tree).as_posix(): e for e in Roots([tree]).inventory().entries
    }
    # THEN each analyzable thing is there once, with its kind; the README is not
    assert {name: e.kind for name, e in listed.items()} == {
        "runs/host_sync_item": "run",
        "logdir": "capture_logdir",
        "lone.xplane.pb": "capture",
        "job.log": "log",
    }
    # AND a run says its processes, status and steps as its run.json has them
    run = listed["runs/host_sync_item"]
    (info,) = (tree / "runs" / "host_sync_item").glob("*/run.json")
    recorded = json.loads(info.read_text())["steps_recorded"]
    assert (run.processes, run.status, run.steps) == ([info.parent.name], "ok", recorded)
    # AND sizes are the files' own
    files = [p for p in (tree / "runs" / "host_sync_item").rglob("*") if p.is_file()]
    assert run.size_bytes == sum(p.stat().st_size for p in files)
    assert run.files == len(files)
    assert listed["job.log"].contents == ["metrics_report", "debug_log"]
    assert listed["lone.xplane.pb"].size_bytes == os.path.getsize(tree / "lone.xplane.pb")


def test_the_inventory_does_not_follow_links(tree: Path, tmp_path: Path) -> None:
    # GIVEN a root with a link to a folder of captures outside it
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(tree / "lone.xplane.pb", outside / "secret.xplane.pb")
    (tree / "peek").symlink_to(outside)
    # WHEN it is listed THEN nothing behind the link shows
    paths = [e.path for e in Roots([tree]).inventory().entries]
    assert not any("secret" in p or "/peek" in p for p in paths)
