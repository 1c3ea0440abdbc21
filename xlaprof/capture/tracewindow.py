"""The trace window: an XProf trace of the steps ``trace_steps`` names, into the run directory."""

from __future__ import annotations

from pathlib import Path


class TraceWindow:
    """Starts and stops ``torch_xla.debug.profiler`` tracing; failures become run warnings.

    Neither method raises: a trace that cannot start or stop is a warning in ``run.json``.
    """

    def __init__(self, directory: Path, warnings: list[str]) -> None:
        self.directory = directory
        self.warnings = warnings
        self.tracing = False

    def start(self) -> None:
        try:
            import torch_xla.debug.profiler as xp

            xp.start_trace(str(self.directory))
            self.tracing = True
        except Exception as error:  # a failed trace must not stop the job
            self.warnings.append(f"trace not started: {error}")

    def stop(self, wait: bool = True) -> None:
        try:
            import torch_xla.core.xla_model as xm
            import torch_xla.debug.profiler as xp

            if wait:
                # Stop only once the window's device work is done, or the trace is empty.
                xm.wait_device_ops()
            xp.stop_trace()
        except Exception as error:  # a failed trace must not stop the job
            self.warnings.append(f"trace not stopped cleanly: {error}")
        self.tracing = False
