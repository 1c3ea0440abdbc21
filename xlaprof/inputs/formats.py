"""The input formats, one entry per format a path can be (``FORMATS``), as the analyzers have
their registry: how a path is recognized (``sniff``, over what ``sniff_path`` found of it),
what loading it yields, and its loader.

``sniff_path`` looks at a path once per request: the run directories at or under it, whether
it is a capture (a file, or a folder of captures that is not a run), a TORCH_TRACE log (or a
folder holding the run's TORCH_TRACE folder) and a saved result (a document of
``xlaprof analyze --json``, by its head). ``format_of`` names its format: the first entry that
claims it. ``xlaprof.inputs.paths.load_inputs`` reads each path once, by its format's loader,
and joins what the formats give together (TORCH_TRACE logs join the one capture, or the files,
given with them). A new input format is an entry here, with its sniff and its loader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Sniffed:
    """What one look at ``path`` found: the run directories at or under it (``runs``),
    whether it is a capture (``capture``: a capture file, or a folder of captures that holds
    no run), TORCH_TRACE logs (``torch_log``: the path itself is or holds them;
    ``torch_beside``: a folder, not a run, holding the run's TORCH_TRACE folder) and a saved
    result (``saved``)."""

    path: Path
    runs: tuple[Path, ...]
    capture: bool
    torch_log: bool
    torch_beside: bool
    saved: bool


@dataclass(frozen=True)
class InputFormat:
    """One input format: its name (as ``--json`` and MCP's listings name it), whether a
    sniffed path is of it, and what loading it yields."""

    name: str
    sniff: Callable[[Sniffed], bool]
    yields: str


def sniff_path(path: Path) -> Sniffed:
    """Look at ``path`` once: everything its format and its loading are decided by."""
    from xlaprof.inputs.captures import is_capture_file
    from xlaprof.inputs.saved import is_saved
    from xlaprof.inputs.torch_traces import is_torch_trace_input
    from xlaprof.rundir.reader import find_runs
    from xlaprof.rundir.schema import TORCH_TRACE_DIR

    folder = path.is_dir()
    runs = tuple(find_runs(path)) if folder else ()
    if path.is_file():
        capture = is_capture_file(path)
    else:
        capture = (
            folder and not runs and any(p.is_file() and is_capture_file(p) for p in path.rglob("*"))
        )
    torch_log = not runs and is_torch_trace_input(path)
    torch_beside = folder and not runs and is_torch_trace_input(path / TORCH_TRACE_DIR)
    return Sniffed(path, runs, capture, torch_log, torch_beside, is_saved(path))


# In the order a path is sniffed: the first format that claims a path is its format.
FORMATS: tuple[InputFormat, ...] = (
    InputFormat(
        "saved_result",
        lambda s: s.saved,
        "the finished result a saved --json document holds, every part it was saved with",
    ),
    InputFormat(
        "run",
        lambda s: bool(s.runs),
        "one part per process run of the run directories at or under the path",
    ),
    InputFormat(
        "torch_trace",
        lambda s: s.torch_log,
        "TORCH_TRACE logs: joined with the one capture or the files given with them, else "
        "one part of their compiles",
    ),
    InputFormat(
        "capture",
        lambda s: s.capture,
        "one part per capture (a file, or a folder of one session's hosts), with its device "
        "model; a TORCH_TRACE folder beside it joins it",
    ),
    InputFormat(
        "files",
        lambda s: True,
        "one part of every report and log file given (one job's output)",
    ),
)


def format_of(sniffed: Sniffed) -> InputFormat:
    """The format of a sniffed path: the first of ``FORMATS`` that claims it."""
    return next(f for f in FORMATS if f.sniff(sniffed))
