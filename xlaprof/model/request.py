"""What one analysis is asked to do: ``AnalysisRequest``, the one input of
``xlaprof.pipeline.analyze``.

Every entry point (``xlaprof analyze``, ``report``, ``diff``, ``check``, ``mcp``, ``bench`` and
the notebook facade) turns its options into a request; the pipeline reads nothing else, so two
commands given the same options analyze the same way. Settings travel here, not in environment
or context variables. A request is frozen: the pipeline never changes what it was asked.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xlaprof.model.parts import Part

# The largest report or log file read by default (``--max-size`` raises it).
DEFAULT_MAX_INPUT_BYTES = 256 * 1024**2

# Which process run of a folder of several a command reads: every one (``xlaprof analyze``),
# or one (``report``, ``diff``, MCP, the facade): the named one, else the latest run's first.
ALL_PROCESSES = "*"


@dataclass(frozen=True)
class AnalysisRequest:
    """One analysis: the inputs and every setting it runs with.

    ``inputs`` are report/log files, run directories (or folders of them) or captures, taken as
    one job's output. ``process`` picks a process run by folder name (``ALL_PROCESSES``: all of
    them; None: those of the latest run, by its recorded start time). ``session`` picks a
    profiling session of a capture logdir (None: the latest). ``source_root`` is the folder
    whose ``*.py`` files findings may quote (None: a run's recorded working directory);
    ``source_root_of`` chooses one per part instead (``xlaprof mcp``: inside its roots only).
    ``max_size`` caps each input file's size in bytes; ``max_size_given`` says the user set it
    (then ratio caps on inflation yield to it). ``scheduler`` and ``workers`` say where a pod's
    hosts are read.
    """

    inputs: tuple[Path, ...]
    process: str | None = None
    session: str | None = None
    warmup_steps: int = 2
    source_root: Path | None = None
    source_root_of: Callable[[Part], Path | None] | None = field(default=None, compare=False)
    max_size: int = DEFAULT_MAX_INPUT_BYTES
    max_size_given: bool = False
    scheduler: str | None = None
    workers: int | None = None

    @classmethod
    def of(
        cls,
        *inputs: str | os.PathLike[str],
        **settings: Any,
    ) -> AnalysisRequest:
        """A request for ``inputs`` (paths as strings or ``Path``), other settings by name."""
        return cls(tuple(Path(p) for p in inputs), **settings)

    def but(self, **changes: Any) -> AnalysisRequest:
        """This request with ``changes`` (a copy: the request itself stays as it was)."""
        return replace(self, **changes)
