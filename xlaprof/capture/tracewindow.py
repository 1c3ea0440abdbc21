"""The trace window: an XProf trace of the steps ``trace_steps`` names, into the run directory."""

from __future__ import annotations

from pathlib import Path


class TraceWindow:
    """Starts and stops ``torch_xla.debug.profiler`` tracing; failures become run warnings."""

    def __init__(self, directory: Path, warnings: list[str]) -> None:
        self.directory = directory
        self.warnings = warnings
        self.tracing = False

    def start(self) -> None:
        import torch_xla.debug.profiler as xp

        try:
            xp.start_trace(str(self.directory))
            self.tracing = True
        except RuntimeError as error:
            self.warnings.append(f"trace not started: {error}")

    def stop(self, wait: bool = True) -> None:
        import torch_xla.core.xla_model as xm
        import torch_xla.debug.profiler as xp

        if wait:
            # Stop only once the window's device work is done, or the trace comes back empty.
            xm.wait_device_ops()
        try:
            xp.stop_trace()
        except RuntimeError as error:
            self.warnings.append(f"trace not stopped cleanly: {error}")
        self.tracing = False
