"""The ``xlaprof`` command itself (``xlaprof.cli``): help for every option, a fast ``--help``."""

from __future__ import annotations

import re
import subprocess
import sys
import time

from helpers import cli


def test_every_option_has_help() -> None:
    import click

    from xlaprof.cli import main

    context = click.Context(main)
    missing = []

    def walk(command: click.Command, path: list[str]) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(context):
                walk(command.get_command(context, name), [*path, name])
            return
        missing.extend(
            f"{' '.join(path)} {p.opts[0]}"
            for p in command.params
            if isinstance(p, click.Option) and not p.help
        )

    walk(main, [])
    assert missing == []
    scan = cli("bench", "scan", "--help").stdout
    assert not re.search(r"\S {3,}\S", scan.split("Options:")[0])  # no broken line
    for name in ("offload", "cache"):
        assert "--repeats" not in cli("bench", name, "--help").stdout
    capture = cli("capture", "--help").stdout
    assert "Host (CPU) events" in capture and "Device (TPU/GPU)" in capture


def test_help_is_fast_and_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from xlaprof.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'torch_xla', 'pandas', 'plotly') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0
    assert result.stdout.strip().splitlines()[-1] == "HEAVY="
    # One timing for the closing note, not an assertion (timings are noisy here).
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "xlaprof", "--help"], capture_output=True, check=True)
    print(f"xlaprof --help took {time.perf_counter() - start:.3f} s")
