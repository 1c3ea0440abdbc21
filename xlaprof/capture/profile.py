"""``xlaprof.profile()``: profile a training loop from inside the training script."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from xlaprof.capture.sampler import DEFAULT_SAMPLE_HZ
from xlaprof.capture.session import DEFAULT_DEBUG_LEVEL, Session, SessionOptions


@contextmanager
def profile(
    out: str | os.PathLike[str] = "xlaprof-runs",
    *,
    trace_steps: tuple[int, int] | None = None,
    max_steps: int | None = None,
    debug_level: int = DEFAULT_DEBUG_LEVEL,
    server_port: int | None = None,
    graphs: bool = True,
    sample_hz: float = DEFAULT_SAMPLE_HZ,
) -> Iterator[Session]:
    """Profile the steps run inside the block into a run directory under ``out``.

    Steps end at each ``torch_xla.sync()``/``xm.mark_step()`` (or at each ``xlaprof.step``
    exit, when the loop uses those). ``trace_steps=(a, b)`` captures an xplane trace of steps
    a..b-1, stopped after their device work finishes. After ``max_steps`` steps recording
    stops (the loop goes on). ``server_port`` starts a profiler server, so ``xlaprof capture``
    can take traces from another process or machine. ``sample_hz`` is the host sampler's rate
    (0 turns it off). Enter it before the first graph runs so
    PT_XLA_DEBUG analysis can be switched on; otherwise the run records a warning and has
    per-step metrics only.

    >>> with xlaprof.profile(out="runs", trace_steps=(5, 8)):   # doctest: +SKIP
    ...     train()
    """
    session = Session(
        out,
        SessionOptions(
            trace_steps=trace_steps,
            max_steps=max_steps,
            debug_level=debug_level,
            server_port=server_port,
            graphs=graphs,
            sample_hz=sample_hz,
        ),
    )
    session.start()
    try:
        yield session
    except KeyboardInterrupt:
        session.finish("interrupted", detail="KeyboardInterrupt")
        raise
    except BaseException as error:
        session.finish("exception", detail=f"{type(error).__name__}: {error}")
        raise
    else:
        session.finish("ok")
