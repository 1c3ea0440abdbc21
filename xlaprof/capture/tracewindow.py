"""The trace window: an XProf trace of the steps ``trace_steps`` names, into the run directory."""

from __future__ import annotations

from pathlib import Path

from xlaprof.capture.runtime import runtime


class TraceWindow:
    """Starts and stops the runtime's profiler trace (``capture.runtime``: torch_xla's
    ``xp.start_trace``/``stop_trace``); failures become run warnings.

    Neither method raises: a trace that cannot start or stop is a warning in ``run.json``.
    """

    def __init__(self, directory: Path, warnings: list[str]) -> None:
        self.directory = directory
        self.warnings = warnings
        self.tracing = False

    def start(self) -> None:
        try:
            runtime().start_trace(str(self.directory))
            self.tracing = True
        except Exception as error:  # a failed trace must not stop the job
            self.warnings.append(f"trace not started: {error}")

    def stop(self, wait: bool = True) -> None:
        try:
            runtime().stop_trace(wait)
        except Exception as error:  # a failed trace must not stop the job
            self.warnings.append(f"trace not stopped cleanly: {error}")
        self.tracing = False
