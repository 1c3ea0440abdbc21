"""Loading a bench TARGET (``xlaprof.fixes.target``) from a training script that reads its
command line at import, as many real scripts do at their top level (issue 47): the worker's own
arguments must not reach the script, and a script that exits while imported is refused in one
line that says what to change."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from xlaprof.errors import TargetError
from xlaprof.fixes.target import load_factory

_PARSES_AT_IMPORT = """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--hidden", type=int, default=16)
{extra}
args = parser.parse_args()


def make():
    return args.hidden
"""


def test_a_script_that_parses_its_command_line_at_import_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a script whose top level parses sys.argv, and a process whose own arguments are
    # not the script's (the bench worker's --target/--variant/--out)
    script = tmp_path / "train_cli.py"
    script.write_text(_PARSES_AT_IMPORT.format(extra=""))
    monkeypatch.setattr(sys, "argv", ["worker.py", "--target", "x", "--variant", "before"])
    # WHEN its factory is loaded THEN the script saw only its own name (its defaults hold)
    assert load_factory(f"{script}:make")() == 16
    assert sys.argv == ["worker.py", "--target", "x", "--variant", "before"]


def test_a_script_that_exits_at_import_is_refused_in_one_line(tmp_path: Path) -> None:
    script = tmp_path / "train_required.py"
    script.write_text(
        _PARSES_AT_IMPORT.format(extra='parser.add_argument("--data", required=True)')
    )
    with pytest.raises(TargetError) as raised:
        load_factory(f"{script}:make")
    message = str(raised.value)
    assert "\n" not in message
    assert "exits while it is imported (exit code 2)" in message
    assert 'if __name__ == "__main__":' in message
