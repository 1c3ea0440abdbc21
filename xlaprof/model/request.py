"""What one analysis is asked to do: ``AnalysisRequest``, the one input of
``xlaprof.pipeline.analyze``.

Every entry point (``xlaprof analyze``, ``report``, ``diff``, ``check``, ``mcp``, ``bench`` and
the notebook facade) turns its options into a request; the pipeline reads nothing else, so two
commands given the same options analyze the same way. Settings travel here, not in environment
or context variables. A request is frozen: the pipeline never changes what it was asked.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
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

# The environment variables of reading a capture of several hosts (``PodSettings``).
SCHEDULER_ENV = "XLAPROF_DASK_SCHEDULER"
LAZY_BYTES_ENV = "XLAPROF_LAZY_BYTES"
TIMEOUT_ENV = "XLAPROF_DASK_TIMEOUT"
CACHE_DIR_ENV = "XLAPROF_CACHE_DIR"
# Above this many bytes of trace files in all, a several-host capture loads lazily.
LAZY_BYTES = 64 * 1024**2
# The timeout of every call to a dask scheduler, in seconds.
DEFAULT_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class PodSettings:
    """How a capture of several hosts is read, where the user set it in the environment: read
    once, where a command or the facade starts (``of(os.environ)``), and carried by the request
    to the loaders, which read no environment variable.

    ``env_scheduler``: a dask scheduler named by ``$XLAPROF_DASK_SCHEDULER`` (checked and
    announced on stderr when used: a variable set once and forgotten must not send work
    silently; ``--scheduler`` goes in ``AnalysisRequest.scheduler``). ``lazy_bytes``: above
    this many bytes of trace files, several hosts load lazily (``$XLAPROF_LAZY_BYTES``).
    ``timeout_s``: of every call to the scheduler (``$XLAPROF_DASK_TIMEOUT``). ``cache_dir``:
    where the per-host caches go instead of beside their captures (``$XLAPROF_CACHE_DIR``;
    None: beside the capture where its folder is writable, else ``~/.cache/xlaprof``).
    """

    env_scheduler: str | None = None
    lazy_bytes: int = LAZY_BYTES
    timeout_s: float = DEFAULT_TIMEOUT_S
    cache_dir: Path | None = None

    @classmethod
    def of(cls, environ: Mapping[str, str]) -> PodSettings:
        """The settings ``environ`` (the process's environment, given by the caller) holds; a
        value that is not a number leaves its default."""
        lazy = _number(environ.get(LAZY_BYTES_ENV), int)
        timeout = _number(environ.get(TIMEOUT_ENV), float)
        cache = (environ.get(CACHE_DIR_ENV) or "").strip()
        return cls(
            env_scheduler=(environ.get(SCHEDULER_ENV) or "").strip() or None,
            lazy_bytes=LAZY_BYTES if lazy is None or lazy < 0 else int(lazy),
            timeout_s=DEFAULT_TIMEOUT_S if timeout is None or timeout <= 0 else timeout,
            cache_dir=Path(cache) if cache else None,
        )


def _number(text: str | None, kind: Callable[[str], float]) -> float | None:
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        return None


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
    hosts are read, and ``pod`` the settings of reading one that the environment holds (read
    at the edge: ``PodSettings.of``).
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
    pod: PodSettings = field(default_factory=PodSettings)

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
