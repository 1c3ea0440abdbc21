"""The sync hook: a step boundary at every ``torch_xla.sync()``, without changing user code."""

from __future__ import annotations

import os
import sys
import weakref
from time import thread_time
from types import FrameType
from typing import Any

# The function torch_xla.compile calls to sync before the compiled function runs (2.x).
_COMPILE_ENTRY = "_clear_pending_ops_before_compile"
_DYNAMO_DIR = "torch_xla/_dynamo/"
_LOADER_FILE = "parallel_loader.py"


def _ends_step(caller: Any) -> bool:
    """False for the syncs torch_xla makes inside one training iteration.

    ``torch_xla.compile``'s sync before the function (it flushes what the caller queued for this
    call) and the syncs of the ``openxla`` dynamo backend while it extracts and runs a graph
    (``torch_xla/_dynamo/dynamo_bridge.py``).
    """
    if caller.co_name == _COMPILE_ENTRY:
        return False
    return _DYNAMO_DIR not in caller.co_filename.replace("\\", "/")


_LOADERS: weakref.WeakSet[Any] = weakref.WeakSet()


def _loader_seen(loader: Any) -> bool:
    """False the first time a loader syncs: that sync, before its first batch, flushes the
    work queued before the loop (``total = torch.zeros(...)``), which belongs to the loop's
    first step, like ``torch_xla.compile``'s sync before the function."""
    if loader is None:
        return True
    try:
        if loader in _LOADERS:
            return True
        _LOADERS.add(loader)
    except TypeError:  # not weak-referenceable: judge its syncs by the graph alone
        return True
    return False


# The code of ``install_sync_hook``'s wrapper: a caller frame running it is another session's.
_WRAPPERS: set[Any] = set()


def hooked_session(torch_xla: Any) -> Any:
    """The session whose hook ``torch_xla.sync`` is now (the innermost), or None."""
    return getattr(torch_xla.sync, "_xlaprof_session", None)


def install_sync_hook(torch_xla: Any, session: Any) -> Any:
    """Wrap ``torch_xla.sync`` so each call ends a step of ``session``; returns what it wrapped.

    ``xm.mark_step``, ``MpDeviceLoader`` and ``xp.StepTrace`` all call ``torch_xla.sync``, so
    every step boundary is seen without changing user code. One training iteration is one step:
    see ``_ends_step`` for the syncs torch_xla makes inside an iteration, and
    ``Session.boundary`` for syncs that ran no graph. The thread's CPU clock is read as the
    call enters, so the step's host CPU splits into the user's code (with its tracing) and
    torch_xla's work in the sync.

    A sync that is already another session's wrapper (``xlaprof.profile()`` inside a script
    run under ``xlaprof run``, or one ``profile()`` inside another) is wrapped in turn, so both
    sessions see every sync; each judges the sync by the first caller outside the wrappers.
    A finished session's wrapper passes calls straight through.

    While ``session.live`` is set (graphs taken from the live tensors, see
    ``capture.graphs.LiveGraphs``) it is called around the sync itself.
    """
    original = torch_xla.sync

    def sync(*args: Any, **kwargs: Any) -> Any:
        entered = thread_time()  # the step's CPU up to here is the user's code and its tracing
        live = session.live if session.recording and os.getpid() == session.pid else None
        if live is not None:
            entered = session.before_sync(live, entered)  # its cost is not the step's
        result = original(*args, **kwargs)
        if session.recording and os.getpid() == session.pid:
            if live is not None:
                session.after_sync(live)
            if not session.user_steps:
                frame = _caller(sys._getframe(1))
                caller = frame.f_code
                if not caller.co_filename.endswith(_LOADER_FILE):
                    if _ends_step(caller):
                        session.boundary(sync_entered_cpu=entered)
                elif _loader_seen(frame.f_locals.get("self")):
                    # MpDeviceLoader syncs at every batch and twice at the end of an epoch: its
                    # syncs end a step only when a graph ran since the last one.
                    session.boundary(graph_required=True, sync_entered_cpu=entered)
                del frame
        return result

    # Marks that tell a wrapper from the original (function attributes live in its __dict__).
    sync.__dict__.update(_xlaprof_session=session, _xlaprof_original=original)
    sync.__doc__ = original.__doc__
    _WRAPPERS.add(sync.__code__)
    torch_xla.sync = sync
    inner: Any = sys.modules.get("torch_xla.torch_xla")
    if inner is not None and getattr(inner, "sync", None) is original:
        inner.sync = sync
    return original


def _caller(frame: FrameType) -> FrameType:
    """The first frame outside the sync wrappers (the user's, the loader's, torch_xla's)."""
    while frame.f_back is not None and frame.f_code in _WRAPPERS:
        frame = frame.f_back
    return frame


def uninstall_sync_hook(torch_xla: Any, session: Any, original: Any) -> None:
    """Put ``original`` back where ``install_sync_hook`` wrapped it for ``session``: the raw
    sync, or the enclosing session's wrapper when this one was nested."""
    if torch_xla is None or original is None:
        return
    if getattr(torch_xla.sync, "_xlaprof_session", None) is session:
        torch_xla.sync = original
        inner: Any = sys.modules.get("torch_xla.torch_xla")
        if inner is not None and getattr(inner.sync, "_xlaprof_session", None) is session:
            inner.sync = original
