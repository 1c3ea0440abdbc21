"""The python frames torch_xla prints (``fn (/path/file.py:12)``), and choosing the user's own.

torch_xla prints frames innermost first, and the innermost ones are usually its own
(``sync (.../torch_xla/torch_xla.py:87)``). A finding must point at the user's line, so library
frames are skipped: installed packages, torch/torch_xla sources, the standard library and
xlaprof's own wrapper. The test is on the path text alone, so it works for captures made on
another machine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from xlaprof.findings import Location

# torch_xla's files that say how a sync was made, as a frame's path ends or holds them: the
# parallel loader (``MpDeviceLoader`` syncs at each batch) and the openxla dynamo backend.
LOADER_FILE = "parallel_loader.py"
DYNAMO_DIR = "torch_xla/_dynamo/"
# The function's name holds no "(" and ends in a non-space: a lazy name beside ``\s+``
# backtracked over each run of spaces, and over each " (" of a line (quadratic).
_FRAME_RE = re.compile(r"^\s*(\S(?:[^(]*?\S)?)\s+\((.*)\)\s*$")
# A frame cut off at the end of a paste: ``train_loop_fn (/home/user/train.py:4``
_CUT_FRAME_RE = re.compile(r"^\s*(\S(?:[^(]*?\S)?)\s+\(([^()]*)$")

_LIBRARY_RE = re.compile(
    r"([/\\](site|dist)-packages[/\\])"
    r"|([/\\]torch(_xla)?[/\\])"
    r"|([/\\]lib[/\\]python3(\.\d+)?[/\\])"
    # xlaprof's own capture code; runtime/annotate/_bootstrap are where runs recorded before the
    # package layout of 0.2 have it.
    r"|([/\\]xlaprof[/\\](capture|cli|runtime|annotate|_bootstrap)[/\\.])"
    r"|^<frozen "
    # code torch.fx generates for a graph module (torch.compile): not the user's source
    r"|^<eval_with_key>"
)


@dataclass(frozen=True)
class Frame:
    """One python frame as torch_xla prints it: ``function (file:line)``."""

    function: str
    file: str | None
    line: int | None
    cut: bool = False  # the text ended inside the frame: file (and line) may be incomplete

    def __str__(self) -> str:
        if self.file is None:
            return self.function
        text = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{text}…" if self.cut else text


def parse_frame(text: str) -> Frame | None:
    """``fn (/path/file.py:12)`` -> Frame; ``None`` if the text is no frame."""
    match = _FRAME_RE.match(text)
    if not match:
        cut = _CUT_FRAME_RE.match(text)
        if cut is None:
            return None
        # Kept as cut: the path or its line number may be missing characters, so the line
        # number is not trusted (":4" may have been ":48").
        file = cut.group(2).strip().rpartition(":")[0] or cut.group(2).strip()
        return Frame(cut.group(1), file or None, None, cut=True)
    function, location = match.group(1), match.group(2)
    file, sep, line = location.rpartition(":")
    if sep and line.isdigit():
        return Frame(function, file, int(line))
    return Frame(function, location or None, None)


def is_library_file(path: str) -> bool:
    """True for frames that are not the user's code."""
    return bool(_LIBRARY_RE.search(path))


def user_frame(frames: Iterable[Frame]) -> Frame | None:
    """The innermost frame that belongs to the user's code, if any."""
    for frame in frames:
        if frame.file is not None and frame.line is not None and not is_library_file(frame.file):
            return frame
    return None


def user_location(frames: Iterable[Frame]) -> Location | None:
    frame = user_frame(frames)
    if frame is None or frame.file is None or frame.line is None:
        return None
    return Location(frame.file, frame.line)
