"""``xlaprof mcp`` at the command line: what it says before any client connects."""

from __future__ import annotations

from pathlib import Path

from helpers import SAMPLES, cli


def test_without_the_sdk_it_says_which_extra_to_install(tmp_path: Path) -> None:
    # GIVEN a Python where `import mcp` fails as it does when the package is not installed
    (tmp_path / "mcp.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')\n"
    )
    # WHEN the server is started
    done = cli("mcp", "--root", str(SAMPLES), env={"PYTHONPATH": str(tmp_path)})
    # THEN one line says what to install, with its own exit code
    assert done.returncode == 26
    assert done.stderr.strip().splitlines() == [
        "xlaprof: error: xlaprof mcp needs the MCP SDK (mcp is not installed): "
        "pip install 'xlaprof[mcp]'"
    ]


def test_a_root_that_is_not_a_folder_is_one_line_and_its_exit_code(tmp_path: Path) -> None:
    # WHEN the server is given a root that does not exist, or none
    missing = cli("mcp", "--root", str(tmp_path / "absent"))
    bare = cli("mcp")
    # THEN each is refused before serving: not found (3), usage (2)
    assert missing.returncode == 3
    assert missing.stderr.startswith("xlaprof: error: ") and "no such folder" in missing.stderr
    assert bare.returncode == 2 and "--root" in bare.stderr


def test_help_lists_the_command() -> None:
    # WHEN `xlaprof --help` runs THEN mcp is among the commands
    done = cli("--help")
    assert done.returncode == 0
    assert "mcp " in done.stdout and "coding agents" in done.stdout
