"""ruff lint and format hold for the whole tree (CI runs this too)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from helpers import REPO


def _ruff() -> list[str]:
    local = Path(sys.executable).with_name("ruff")
    return [str(local)] if local.exists() else [shutil.which("ruff") or "ruff"]


def test_ruff_check() -> None:
    result = subprocess.run([*_ruff(), "check", "."], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_ruff_format() -> None:
    result = subprocess.run(
        [*_ruff(), "format", "--check", "."], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout
