"""Choosing the user's own frame from the python frames torch_xla prints.

torch_xla prints frames innermost first, and the innermost ones are usually its own
(``sync (.../torch_xla/torch_xla.py:87)``). A finding must point at the user's line, so library
frames are skipped: installed packages, torch/torch_xla sources, the standard library and
xlaprof's own wrapper. The test is on the path text alone, so it works for captures made on
another machine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from xlaprof.findings import Location
from xlaprof.parse.debug_log import Frame

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
