"""What a session sets up as it starts: torch_xla, its run directory and its description, and
the environment torch_xla reads when its first graph runs (debug analysis, the fallback tracker,
HLO dumps), which the session puts back when it finishes."""

from __future__ import annotations

import os
import platform
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xlaprof.capture import probe
from xlaprof.capture.graphs import GraphHarvester, SourceFrames
from xlaprof.capture.metrics import METRICS_SAMPLES
from xlaprof.capture.rows import LogSize, file_limit
from xlaprof.errors import RuntimeUnavailable
from xlaprof.rundir.schema import DEBUG_LOG, FALLBACK_LOG, RunInfo

# The variables of the environment recorded in run.json.
_ENV_PREFIXES = ("XLA_", "PJRT_", "PT_XLA_", "TPU_", "LIBTPU_", "XLAPROF_")
# Environment a session sets for torch_xla; restored when the session finishes.
_SESSION_ENV = (
    "PT_XLA_DEBUG_LEVEL",
    "PT_XLA_DEBUG_FILE",
    "XLA_FNTRACKER_FILE",
    "XLA_FLAGS",
    "XLA_HLO_DEBUG",
    "XLA_METRICS_SAMPLES",
)


def import_runtime() -> tuple[Any, Any]:
    """torch_xla and its compiled extension; ``RuntimeUnavailable`` where it cannot load."""
    try:
        import torch_xla
    except ImportError as error:
        raise RuntimeUnavailable(
            f"torch_xla cannot be imported here ({error}); install xlaprof[runtime] to "
            "profile, or analyze a run captured elsewhere"
        ) from None
    return torch_xla, torch_xla._XLAC


def unique_directory(out: Path) -> Path:
    """A new run directory under ``out``: ``<host>-<pid>``, with a suffix if that is taken."""
    out.mkdir(parents=True, exist_ok=True)
    base = f"{socket.gethostname()}-{os.getpid()}"
    for suffix in range(1000):
        candidate = out / (base if suffix == 0 else f"{base}-{suffix}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise RuntimeError(f"no free run directory name under {out}")


def run_info(
    command: list[str],
    pid: int,
    trace_steps: tuple[int, int] | None,
    debug_level: int,
    torch_xla: Any,
) -> RunInfo:
    """The run's description as it starts: versions, environment, command, host and process."""
    return RunInfo(
        xlaprof_version=probe.package_version("xlaprof"),
        torch_version=probe.module_version("torch"),
        torch_xla_version=getattr(torch_xla, "__version__", None),
        python_version=platform.python_version(),
        cxx11_abi=probe.cxx11_abi(),
        env={k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)},
        command=command,
        cwd=os.getcwd(),
        host=socket.gethostname(),
        pid=pid,
        started=time.time(),
        trace_steps=list(trace_steps) if trace_steps else None,
        debug_level=debug_level,
    )


def saved_environment() -> dict[str, str | None]:
    """The variables a session sets, as they are before it sets them."""
    return {name: os.environ.get(name) for name in _SESSION_ENV}


def restore_environment(saved: dict[str, str | None]) -> None:
    """Put back the variables ``saved_environment`` saved, so the process's is as it was."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@dataclass
class DebugOutput:
    """What ``enable_debug_output`` turned on: the logs torch_xla appends to, IR debug and the
    HLO dumps (with graphs), and what will be missing."""

    debug_log: LogSize
    fallback_log: LogSize
    frames: SourceFrames | None = None
    harvester: GraphHarvester | None = None
    warnings: list[str] = field(default_factory=list)


def enable_debug_output(
    directory: Path, xlac: Any, debug_level: int, graphs: bool, source_frames: str
) -> DebugOutput:
    """Point torch_xla's debug analysis (at ``debug_level``, 0: off), fallback tracker and,
    with ``graphs``, HLO dumps at ``directory``. torch_xla reads these when its first graph is
    built, not at import."""
    os.environ.setdefault("XLA_METRICS_SAMPLES", METRICS_SAMPLES)
    output = DebugOutput(debug_log=LogSize(None), fallback_log=LogSize(None))
    if debug_level > 0:
        level = max(debug_level, int(os.environ.get("PT_XLA_DEBUG_LEVEL", "0") or 0))
        os.environ["PT_XLA_DEBUG_LEVEL"] = str(level)
        os.environ["PT_XLA_DEBUG_FILE"] = str(directory / DEBUG_LOG)
        output.debug_log = LogSize(directory / DEBUG_LOG, file_limit())
    os.environ["XLA_FNTRACKER_FILE"] = str(directory / FALLBACK_LOG)
    output.fallback_log = LogSize(directory / FALLBACK_LOG, file_limit())
    if graphs:
        # Each compiled module's HLO text. Its source file:line metadata needs IR debug
        # while ops are traced (SourceFrames switches it) and XLA_HLO_DEBUG when graphs are
        # lowered (read at the first lowering).
        os.environ.setdefault("XLA_HLO_DEBUG", "1")
        output.frames = SourceFrames(xlac, source_frames)
        if not output.frames.available and os.environ.get("XLA_IR_DEBUG") != "1":
            output.warnings.append(
                "graphs have no source lines: this torch_xla cannot switch IR debug at run "
                "time; set XLA_IR_DEBUG=1 before importing torch_xla (xlaprof run does)"
            )
        if os.environ.get("XLA_HLO_DEBUG") != "1":
            output.warnings.append("graphs have no source lines: XLA_HLO_DEBUG is not 1")
        output.harvester = GraphHarvester(directory)
        os.environ["XLA_FLAGS"] = output.harvester.xla_flags(os.environ.get("XLA_FLAGS", ""))
    return output
