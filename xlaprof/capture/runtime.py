"""The runtime a profiling session runs on, behind one interface.

What the capture side asks of the runtime that executes the job (docs/runtimes.md lists each
operation, what torch_xla does for it and what TorchTPU offers, as far as verified):

- ``trace_me()``: the class of a named host range the runtime's profiler records (a TraceMe):
  the annotations (``xlaprof.region``, ``xlaprof.steps``) and each step's marker use it;
- ``start_trace(directory)`` / ``stop_trace(wait)``: an XProf trace of a window of steps into a
  folder (``plugins/profile/<time>/<host>.xplane.pb``);
- ``start_server(port)``: the profiler server ``xlaprof capture`` and XProf connect to;
- ``wait_device()``: block until the device's queued work is done (a trace stopped earlier
  misses it);
- ``describe_device(info)`` / ``device_memory()``: kind, count, rank, memory in use.

The lazy-tensor recorders (the sync hook, per-step metrics, graph harvest, eager mode) are
torch_xla's own concepts and stay in their modules; a runtime without them runs the session
without those rows. Only ``TorchXla`` is implemented: TorchTPU's profiler is reached today only
through ``torch_tpu._internal`` (not a public API; docs/runtimes.md), and its device calls need
a TPU to verify. Nothing is imported until a method is called.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

log = logging.getLogger(__name__)


class Runtime(Protocol):
    """The operations the capture side needs from the runtime running the job."""

    name: str

    def trace_me(self) -> Any: ...

    def start_trace(self, directory: str) -> None: ...

    def stop_trace(self, wait: bool) -> None: ...

    def start_server(self, port: int) -> Any: ...

    def wait_device(self) -> None: ...

    def describe_device(self, info: Any) -> None: ...

    def device_memory(self) -> dict[str, int] | None: ...


class TorchXla:
    """PyTorch/XLA (``torch_xla``): its profiler, runtime and memory calls."""

    name = "torch_xla"

    def trace_me(self) -> Any:
        import torch_xla

        return torch_xla._XLAC.profiler.TraceMe

    def start_trace(self, directory: str) -> None:
        import torch_xla.debug.profiler as xp

        xp.start_trace(directory)

    def stop_trace(self, wait: bool) -> None:
        import torch_xla.debug.profiler as xp

        if wait:
            # Stop only once the window's device work is done, or the trace is empty.
            self.wait_device()
        xp.stop_trace()

    def start_server(self, port: int) -> Any:
        import torch_xla.debug.profiler as xp

        return xp.start_server(port)

    def wait_device(self) -> None:
        import torch_xla.core.xla_model as xm

        xm.wait_device_ops()

    def describe_device(self, info: Any) -> None:
        import torch_xla.runtime as xr

        info.device_kind = xr.device_type()
        info.device_count = xr.global_runtime_device_count()
        info.rank = xr.global_ordinal()
        info.device_memory = self.device_memory()

    def device_memory(self) -> dict[str, int] | None:
        try:
            import torch_xla.core.xla_model as xm

            # Read as a mapping: some runtimes also report a key torch_xla's MemoryInfo lacks.
            info: Mapping[str, Any] = xm.get_memory_info()
        except Exception as error:
            log.debug("no device memory info: %s", error)
            return None
        used, limit = info.get("bytes_used"), info.get("bytes_limit")
        if not used or not limit:
            return None
        memory = {"bytes_used": int(used), "bytes_limit": int(limit)}
        if info.get("peak_bytes_used"):
            memory["peak_bytes_used"] = int(info["peak_bytes_used"])
        return memory


# The runtime sessions use (one per process): torch_xla, the only one implemented.
RUNTIME: Runtime = TorchXla()


def runtime() -> Runtime:
    """The runtime of this process's sessions."""
    return RUNTIME
