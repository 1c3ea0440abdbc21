"""The analysing commands' own process settings (``xlaprof.cli.process_memory``): which inputs
count as small, that keeping freed memory really spares the faults of a reused block, as the
kernel counts them (minor faults: a count of pages, not a time), and that the start-up's objects
are frozen while later garbage is still collected."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import sample_run

from xlaprof.cli.process_memory import KEEP_FREED_UP_TO, input_bytes

# In a child: keep_freed_memory for the input named, then a 64 MB block made, freed while a
# second block lies above it on the heap, and made again: the faults of that remaking.
_REMADE = textwrap.dedent(
    """
    import json, resource, sys
    from pathlib import Path
    import numpy as np
    from xlaprof.cli.process_memory import keep_freed_memory, small_pages

    small_pages()
    kept = keep_freed_memory([Path(sys.argv[1])])
    size = 8 * 1024 * 1024  # float64s: 64 MB, over glibc's largest mmap threshold (32 MB)
    first = np.ones(size)
    above = np.ones(size)
    del first
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    again = np.ones(size)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    print(json.dumps({"kept": kept, "faults": faults, "pages": size * 8 // 4096}))
    """
)


def _remade(path: Path, **env: str) -> dict[str, Any]:
    """What the child above saw for input ``path`` (with ``env`` added to its environment)."""
    # glibc's own settings as the test process may hold them (another test's, a CI runner's)
    # are left out: only ``env`` sets them
    inherited = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    inherited = {k: v for k, v in inherited.items() if not k.startswith("MALLOC_")}
    found = subprocess.run(
        [sys.executable, "-c", _REMADE, str(path)],
        capture_output=True,
        text=True,
        check=True,
        env={**inherited, **env},
    )
    result: dict[str, Any] = json.loads(found.stdout)
    return result


def test_sizes_of_files_and_folders_are_summed(tmp_path: Path) -> None:
    (tmp_path / "run" / "traces").mkdir(parents=True)
    (tmp_path / "run" / "metrics.txt").write_bytes(b"x" * 100)
    (tmp_path / "run" / "traces" / "host.xplane.pb").write_bytes(b"y" * 250)
    alone = tmp_path / "alone.pb"
    alone.write_bytes(b"z" * 7)
    assert input_bytes([alone], 10**6) == 7
    assert input_bytes([tmp_path / "run", alone], 10**6) == 357
    # Counting stops once over: a total above the cap, not necessarily all of it.
    assert input_bytes([tmp_path / "run", alone], 150) > 150


def test_what_cannot_be_looked_at_counts_as_large(tmp_path: Path) -> None:
    assert input_bytes([tmp_path / "missing.pb"], 1000) == 1001
    many = tmp_path / "many"
    many.mkdir()
    for i in range(20_001):
        (many / str(i)).touch()
    assert input_bytes([many], 1000) == 1001


def test_a_link_counts_as_its_target(tmp_path: Path) -> None:
    target = tmp_path / "target.pb"
    target.write_bytes(b"t" * 40)
    (tmp_path / "session").mkdir()
    (tmp_path / "session" / "host.xplane.pb").symlink_to(target)
    (tmp_path / "session" / "dangling.pb").symlink_to(tmp_path / "gone")
    assert input_bytes([tmp_path / "session"], 1000) == 40


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_a_small_input_has_freed_memory_reused(tmp_path: Path) -> None:
    small = tmp_path / "small.xplane.pb"
    small.write_bytes(b"\0" * 1000)
    large = tmp_path / "large.xplane.pb"
    with large.open("wb") as file:  # sparse: no disk used
        file.truncate(KEEP_FREED_UP_TO + 1)

    kept = _remade(small)
    assert kept["kept"] is True
    # The block is remade in the hole the freed one left: its pages are already there.
    assert kept["faults"] < kept["pages"] // 10

    default = _remade(large)
    assert default["kept"] is False
    # glibc's own way: a fresh mapping, each page faulted in as it is first written.
    assert default["faults"] >= kept["pages"] * 9 // 10

    # A user's own malloc settings stand.
    assert _remade(small, MALLOC_ARENA_MAX="2", MALLOC_TOP_PAD_="0")["kept"] is False


# In a child: `xlaprof analyze --json` of a sample run as the command line runs it, then what
# the garbage collector holds: how many objects were frozen, and whether a reference cycle
# made after the analysis is still collected.
_FROZEN = textwrap.dedent(
    """
    import gc, json, sys
    from xlaprof.cli import main

    try:
        main(["analyze", sys.argv[1], "--json"], standalone_mode=False)
    except SystemExit:
        pass
    frozen = gc.get_freeze_count()
    cycle = []
    cycle.append(cycle)
    del cycle
    print(json.dumps({"frozen": frozen, "collected": gc.collect()}))
    """
)


def test_analyze_freezes_its_start_up_objects_and_still_collects_later_ones() -> None:
    found = subprocess.run(
        [sys.executable, "-c", _FROZEN, str(sample_run("healthy_loop"))],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(found.stdout.strip().splitlines()[-1])
    # the modules imported to get to the analysis: thousands of objects at the least
    assert result["frozen"] > 5_000
    assert result["collected"] >= 1  # the cycle made after the freeze
