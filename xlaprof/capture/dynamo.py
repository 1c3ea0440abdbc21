"""Dynamo's own account of ``torch.compile``: recompile reasons, graph breaks and compiles.

``torch.compile(model, backend="openxla")`` recompiles when a guard fails (a new input size, a
changed Python constant) and splits the function where it cannot trace (a graph break). Dynamo
says why in two of its logging artifacts, ``recompiles`` and ``graph_breaks`` (what
``TORCH_LOGS=recompiles,graph_breaks`` prints). This module turns both on for the process,
without printing them unless the user asked (their loggers stop propagating), catches every
record with the step it fell in and the user's source lines on the stack, and appends them to
``dynamo.jsonl``; dynamo's compile start/end callbacks add one line per compile.

Only ``torch._dynamo``/``torch._logging`` (imported by torch_xla anyway) are used, through their
artifact-logger registry; when those are missing or changed, recording is off and the reason is
returned for the run's warnings. Nothing here raises into user code.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from xlaprof.rundir.schema import DYNAMO

ARTIFACTS = ("recompiles", "graph_breaks")
MAX_MESSAGE_CHARS = 4000
MAX_RECORDS = 2000
_MAX_FRAMES = 6


class _Handler(logging.Handler):
    def __init__(self, recorder: DynamoRecorder) -> None:
        super().__init__(level=logging.DEBUG)
        self.recorder = recorder

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # a profiler must never break a compile
            self.recorder.record_log(record)


class DynamoRecorder:
    """Appends dynamo's recompile reasons, graph breaks and compiles to ``dynamo.jsonl``."""

    def __init__(
        self,
        directory: Path,
        step: Callable[[], int],
        is_library: Callable[[str], bool],
    ) -> None:
        self.path = directory / DYNAMO
        self.step = step
        self.is_library = is_library
        self.file: TextIO | None = None
        self.handler = _Handler(self)
        self.loggers: list[tuple[logging.Logger, int, bool]] = []
        self.callbacks: list[tuple[Any, Any]] = []
        self.started: dict[str, float] = {}
        self.written = 0
        self.compiles = 0
        self.enabled: list[str] = []  # artifacts switched on here (off again at stop)
        self.state: Any = None
        self.on_compile_start: Callable[[], None] | None = None

    def start(self) -> str | None:
        """Switch recording on; returns why not when it cannot be (for the run's warnings)."""
        try:
            # Dynamo registers its artifact loggers when it is imported (torch_xla imports it):
            # they must exist before they can be caught.
            import torch._dynamo  # noqa: F401
            from torch._logging import _internal as torch_logging
        except ImportError as error:
            return f"dynamo recording off: {error}"
        registry = getattr(torch_logging, "log_registry", None)
        state = getattr(torch_logging, "log_state", None)
        if registry is None or state is None:
            return "dynamo recording off: torch._logging has no log registry here"
        self.file = self.path.open("a", buffering=1)
        self.state = state
        for artifact in ARTIFACTS:
            user_enabled = state.is_artifact_enabled(artifact)
            if not user_enabled:
                state.enable_artifact(artifact)
                self.enabled.append(artifact)
            for qname in registry.get_artifact_log_qnames():
                if not qname.endswith(f".__{artifact}"):
                    continue
                logger = logging.getLogger(qname)
                self.loggers.append((logger, logger.level, logger.propagate))
                logger.setLevel(logging.DEBUG)
                logger.propagate = user_enabled  # print only what the user asked to see
                logger.addHandler(self.handler)
        self._register_callbacks()
        return None

    def _register_callbacks(self) -> None:
        try:
            from torch._dynamo.callback import callback_handler
        except ImportError:
            return
        start = callback_handler.register_start_callback(self._compile_start)
        end = callback_handler.register_end_callback(self._compile_end)
        self.callbacks = [(callback_handler.remove_start_callback, start)]
        self.callbacks.append((callback_handler.remove_end_callback, end))

    def stop(self) -> None:
        for logger, level, propagate in self.loggers:
            logger.removeHandler(self.handler)
            logger.setLevel(level)
            logger.propagate = propagate
        self.loggers.clear()
        for artifact in self.enabled:
            with contextlib.suppress(Exception):
                self.state.artifact_names.discard(artifact)
        self.enabled.clear()
        for remove, callback in self.callbacks:
            with contextlib.suppress(Exception):
                remove(callback)
        self.callbacks.clear()
        if self.file is not None:
            self.file.close()
            self.file = None

    # -- records ---------------------------------------------------------------------------
    def _user_frames(self) -> list[str]:
        frames: list[str] = []
        frame: Any = sys._getframe(2)
        while frame is not None and len(frames) < _MAX_FRAMES:
            if not self.is_library(frame.f_code.co_filename):
                frames.append(f"{frame.f_code.co_filename}:{frame.f_lineno}")
            frame = frame.f_back
        del frame
        return frames

    def _write(self, entry: dict[str, Any]) -> None:
        if self.file is None or self.written >= MAX_RECORDS:
            return
        entry["step"] = self.step()
        entry["time"] = time.time()
        self.file.write(json.dumps(entry) + "\n")
        self.written += 1

    def record_log(self, record: logging.LogRecord) -> None:
        artifact = getattr(logging.getLogger(record.name), "artifact_name", None)
        kind = "recompile" if artifact == "recompiles" else "graph_break"
        self._write(
            {
                "kind": kind,
                "message": record.getMessage()[:MAX_MESSAGE_CHARS],
                "user_frames": self._user_frames(),
            }
        )

    def _compile_start(self, args: Any = None) -> None:
        compile_id = str(getattr(args, "compile_id", None))
        self.started[compile_id] = time.perf_counter()
        self.compiles += 1
        if self.on_compile_start is not None:
            with contextlib.suppress(Exception):
                self.on_compile_start()

    def _compile_end(self, args: Any = None) -> None:
        compile_id = str(getattr(args, "compile_id", None))
        began = self.started.pop(compile_id, None)
        self._write(
            {
                "kind": "compile",
                "compile_id": compile_id,
                "seconds": None if began is None else round(time.perf_counter() - began, 6),
                "user_frames": self._user_frames(),
            }
        )
