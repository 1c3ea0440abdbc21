"""The renderer contract (see ``xlaprof.report``): what a renderer is and the options it takes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO


@dataclass(frozen=True)
class RenderOptions:
    """How to render: ``verbose`` lists every unreadable input line; ``width`` is the terminal
    width in characters (the console's; None: the terminal's own, or 80); ``file_width`` the
    width to wrap at when writing to a file or pipe (the CLI's ``COLUMNS``; None: no
    wrapping); ``workspace`` the folder GitHub annotations name files relative to (the CLI's
    ``GITHUB_WORKSPACE``; None: as recorded); ``self_check`` whether the ``--json`` writer
    checks its document against the schema it is read back by (the CLI's
    ``XLAPROF_SELF_CHECK``, which the test suite sets). The renderers read no environment
    variable."""

    verbose: bool = False
    width: int | None = None
    file_width: int | None = None
    workspace: str | None = None
    self_check: bool = False


@dataclass(frozen=True)
class Renderer:
    """One output form of one kind of result."""

    name: str
    accepts: type
    write: Callable[[Any, TextIO, RenderOptions], None]
    extensions: tuple[str, ...] = ()
