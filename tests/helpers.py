"""Test helpers: where a line is in an example, the JSON contract check, captures linked into
folders of their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def line_of(example: str, needle: str) -> int:
    """1-based line of the first line in examples/<example>.py that contains ``needle``."""
    lines = (EXAMPLES / f"{example}.py").read_text().splitlines()
    for number, line in enumerate(lines, start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {example}")


def _optional(value: Any, kind: type | tuple[type, ...]) -> bool:
    return value is None or (isinstance(value, kind) and not isinstance(value, bool))


def check_contract(document: dict[str, Any]) -> None:
    """Assert ``document`` has every key and type of xlaprof.analysis/1 (docs/json-format.md)."""
    assert document["schema"] == "xlaprof.analysis/1"
    for report in document["reports"]:
        for name, metric in report["metrics"].items():
            assert isinstance(name, str)
            assert _optional(metric["total_samples"], int)
            assert _optional(metric["accumulator"], (int, float))
            assert metric["unit"] in ("s", "B", "")
        for name, value in report["counters"].items():
            assert isinstance(name, str) and _optional(value, int)
    for event in document["debug_events"]:
        assert event["kind"] in ("compilation", "execution")
        assert _optional(event["cause"], str) and _optional(event["graph_hash"], str)
        assert _optional(event["graph_inputs"], int) and _optional(event["graph_outputs"], int)
        for frame in event["frames"]:
            assert isinstance(frame["function"], str)
            assert _optional(frame["file"], str) and _optional(frame["line"], int)
    summary = document["summary"]
    for key in ("compiles", "executions", "device_to_host_transfers"):
        assert _optional(summary[key], int)
    assert all(_optional(v, int) for v in summary["aten_fallbacks"].values())
    for finding in document["findings"]:
        assert isinstance(finding["kind"], str)
        assert finding["severity"] in ("info", "warning", "error")
        assert isinstance(finding["title"], str) and finding["title"]
        location = finding["location"]
        assert location is None or (
            isinstance(location["file"], str) and isinstance(location["line"], int)
        )
        assert isinstance(finding["evidence"], dict)
        assert isinstance(finding["suggestion"], str) and finding["suggestion"]


def link_each(names: list[str], source: Path, root: Path) -> dict[str, Path]:
    """Each capture in ``source`` linked into a folder of its own under ``root``.

    XProf's converters and the pod cache write files beside a capture: linked, nothing lands
    next to the real captures (``../shared/traces``, ``sample_traces/gpu``).
    """
    links = {}
    for name in names:
        folder = root / name.split(".")[0]
        folder.mkdir()
        (folder / name).symlink_to(source / name)
        links[name] = folder / name
    return links
