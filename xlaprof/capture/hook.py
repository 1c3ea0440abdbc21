"""Starting a session from the environment ``xlaprof run`` sets (see ``_bootstrap``)."""

from __future__ import annotations

import os
import sys

from xlaprof.capture.sampler import DEFAULT_SAMPLE_HZ
from xlaprof.capture.session import Session, SessionOptions

ENV_OUT = "XLAPROF_RUN_OUT"
ENV_TRACE_STEPS = "XLAPROF_TRACE_STEPS"
ENV_MAX_STEPS = "XLAPROF_MAX_STEPS"
ENV_DEBUG_LEVEL = "XLAPROF_DEBUG_LEVEL"
ENV_SERVER_PORT = "XLAPROF_SERVER_PORT"
ENV_GRAPHS = "XLAPROF_GRAPHS"
# Tuning knobs, also how benchmarks/overhead.py switches one part off at a time.
ENV_SAMPLE_HZ = "XLAPROF_SAMPLE_HZ"  # host sampler rate; 0 turns it off
ENV_SOURCE_FRAMES = "XLAPROF_SOURCE_FRAMES"  # "auto" (default) or "always": IR debug throughout


def parse_steps_window(text: str) -> tuple[int, int]:
    """``A:B`` -> (A, B): steps A..B-1, like a Python slice."""
    start, sep, end = text.partition(":")
    if not sep:
        raise ValueError(f"expected A:B, got {text!r}")
    window = (int(start), int(end))
    if not 0 <= window[0] < window[1]:
        raise ValueError(f"expected 0 <= A < B, got {text!r}")
    return window


def _first_process() -> bool:
    claimed = os.environ.get("XLAPROF_SERVER_CLAIMED")
    if claimed:
        return False
    os.environ["XLAPROF_SERVER_CLAIMED"] = str(os.getpid())  # children inherit it
    return True


def start_from_environment() -> Session:
    trace = os.environ.get(ENV_TRACE_STEPS)
    max_steps = os.environ.get(ENV_MAX_STEPS)
    port = os.environ.get(ENV_SERVER_PORT)
    options = SessionOptions(
        trace_steps=parse_steps_window(trace) if trace else None,
        max_steps=int(max_steps) if max_steps else None,
        debug_level=int(os.environ.get(ENV_DEBUG_LEVEL, "2")),
        exit_on_max_steps=True,
        command=[sys.executable, *sys.argv],
        graphs=os.environ.get(ENV_GRAPHS, "1") != "0",
        sample_hz=float(os.environ.get(ENV_SAMPLE_HZ) or DEFAULT_SAMPLE_HZ),
        source_frames=os.environ.get(ENV_SOURCE_FRAMES) or "auto",
        # Only the first process gets the port (ranks would collide on it).
        server_port=int(port) if port and _first_process() else None,
    )
    session = Session(os.environ[ENV_OUT], options)
    return session.start(install_exit_handlers=True)
