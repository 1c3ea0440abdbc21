"""The ``xlaprof`` command itself (``xlaprof.cli``): help for every option, a fast ``--help``."""

from __future__ import annotations

import re

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
