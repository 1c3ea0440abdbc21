"""The renderer contract (see ``xlaprof.report``): what a renderer is and the options it takes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO


@dataclass(frozen=True)
class RenderOptions:
    """How to render: ``verbose`` lists every unreadable input line; ``width`` is the terminal
    width in characters (the console's; None: the terminal's own, or 80)."""

    verbose: bool = False
    width: int | None = None


@dataclass(frozen=True)
class Renderer:
    """One output form of one kind of result."""

    name: str
    accepts: type
    write: Callable[[Any, TextIO, RenderOptions], None]
    extensions: tuple[str, ...] = ()
