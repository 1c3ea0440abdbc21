"""The sync hook: a step boundary at every ``torch_xla.sync()``, without changing user code."""

from __future__ import annotations

import os
import sys
import weakref
from time import perf_counter, thread_time
from types import FrameType
from typing import Any

from xlaprof.parse.frames import DYNAMO_DIR, LOADER_FILE

# The function torch_xla.compile calls to sync before the compiled function runs (2.x).
_COMPILE_ENTRY = "_clear_pending_ops_before_compile"
# torch_xla's collectives sync around their exchanges (``xm.mesh_reduce`` and ``xm.rendezvous``
# through ``xla_rendezvous``, as Trainer and accelerate log; ``broadcast_master_param`` as
# accelerate prepares a model): inside an iteration or between them, never one of their own.
_COLLECTIVES_FILE = "torch_xla/core/xla_model.py"
_COLLECTIVES = frozenset({"xla_rendezvous", "broadcast_master_param"})
_UNSET = object()
# torch_xla's sharding wrappers, whose constructors sync (see ``_ends_step``).
_WRAPPER_FILES = (
    "torch_xla/distributed/fsdp/xla_fully_sharded_data_parallel.py",
    "torch_xla/experimental/spmd_fully_sharded_data_parallel.py",
)


def _ends_step(caller: Any) -> bool:
    """False for the syncs torch_xla makes inside one training iteration.

    ``torch_xla.compile``'s sync before the function (it flushes what the caller queued for this
    call), the syncs of the ``openxla`` dynamo backend while it extracts and runs a graph
    (``torch_xla/_dynamo/dynamo_bridge.py``), those of torch_xla's collectives
    (``_COLLECTIVES``), and the sync FSDP's constructor makes to shard the parameters it wraps
    (``execute_sharding_on_init``, once per wrapped submodule): set-up, whose work goes to the
    first step, as a loader's first sync does.
    """
    if caller.co_name == _COMPILE_ENTRY:
        return False
    file = caller.co_filename.replace("\\", "/")
    if caller.co_name == "__init__" and file.endswith(_WRAPPER_FILES):
        return False  # a sharding wrapper's constructor: set-up, before any training step
    if caller.co_name in _COLLECTIVES and file.endswith(_COLLECTIVES_FILE):
        return False
    return DYNAMO_DIR not in file


def _loader_seen(loader: Any, seen: weakref.WeakSet[Any]) -> bool:
    """False the first time a loader syncs (noted in ``seen``): that sync, before its first
    batch, flushes the work queued before the loop (``total = torch.zeros(...)``), which belongs
    to the loop's first step, like ``torch_xla.compile``'s sync before the function."""
    if loader is None:
        return True
    try:
        if loader in seen:
            return True
        seen.add(loader)
    except TypeError:  # not weak-referenceable: judge its syncs by the graph alone
        return True
    return False


class StepEnds:
    """Which syncs end a training iteration: one session's step model.

    * Outside a loader's epoch, every sync ``_ends_step`` keeps ends a step, except, once a
      step has ended with autograd on (the script trains), syncs made with autograd off: an
      evaluation loop's ``mark_step`` under ``torch.no_grad()`` adds no step, its work goes to
      the next one. A script that never trains (inference) keeps every sync.
    * While a loader's epoch runs (``MpDeviceLoader``, accelerate's wrapper), the loader drives
      the loop: each batch it hands out is one step. The first sync after a batch was handed
      out (the loader's own, at the next batch, or the script's ``mark_step``) ends it; other
      syncs before the next batch end nothing (Trainer's log point syncs, then reads and
      gathers, before the next batch). Another loader's syncs inside that epoch (an evaluation
      loader) end nothing either. The loader's first sync, before its first batch, flushes the
      set-up work into the first step; its sync at the end of the epoch ends the driver's epoch.

    ``Session.boundary`` still drops a sync that ran nothing (see ``Metrics.idle``).
    """

    def __init__(self) -> None:
        self.driver: weakref.ref[Any] | None = None  # the loader whose epoch is running
        self.batch_open = False  # the driver handed out a batch that no step has ended yet
        self.trained = False  # a step ended with autograd on
        # loaders whose first sync this session saw (each nested session judges its own)
        self.loaders: weakref.WeakSet[Any] = weakref.WeakSet()

    def decide(self, frame: Any, grad_enabled: bool) -> bool | None:
        """For the sync called from ``frame``: None when it ends no step, else whether the step
        it ends needs a graph built since the last one (``Session.boundary``'s
        ``graph_required``)."""
        caller = frame.f_code
        if caller.co_filename.endswith(LOADER_FILE):
            return self._loader_sync(frame, grad_enabled)
        if not _ends_step(caller):
            return None
        if self._driving() is not None:
            return False if self.batch_open else None
        return None if self.trained and not grad_enabled else False

    def _loader_sync(self, frame: Any, grad_enabled: bool) -> bool | None:
        """``decide`` for a sync a loader made (``PerDeviceLoader.next``)."""
        loader = frame.f_locals.get("self")
        first = not _loader_seen(loader, self.loaders)
        driver = self._driving()
        if self.trained and not grad_enabled and driver is None:
            return None  # an evaluation loader's batches are no training iterations
        if frame.f_locals.get("item", _UNSET) is None:  # the sync before StopIteration
            if driver is loader:
                self.driver, self.batch_open = None, False
            return None
        if driver is None and loader is not None:
            try:
                self.driver, driver = weakref.ref(loader), loader
            except TypeError:  # not weak-referenceable: no loader drives; its syncs end steps
                return True
        if loader is not driver:
            return None
        ends = self.batch_open and not first
        self.batch_open = True
        return True if ends else None

    def ended(self, step_ended: bool, graph_required: bool, grad_enabled: bool) -> None:
        """Note the outcome of a boundary ``decide`` asked for."""
        if not step_ended:
            return
        if grad_enabled:
            self.trained = True
        if not graph_required:  # the script's own sync ended the driver's batch
            self.batch_open = False

    def _driving(self) -> Any:
        loader = None if self.driver is None else self.driver()
        if loader is None:
            self.driver = None
        return loader


def _grad_enabled() -> bool:
    """Whether autograd is on in the calling thread (True when torch cannot say)."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch.is_grad_enabled())  # type: ignore[union-attr]
    except Exception:  # a profiler must never break the sync it wraps
        return True


# The code of ``install_sync_hook``'s wrapper: a caller frame running it is another session's.
_WRAPPERS: set[Any] = set()


def hooked_session(torch_xla: Any) -> Any:
    """The session whose hook ``torch_xla.sync`` is now (the innermost), or None."""
    return getattr(torch_xla.sync, "_xlaprof_session", None)


def install_sync_hook(torch_xla: Any, session: Any) -> Any:
    """Wrap ``torch_xla.sync`` so each call ends a step of ``session``; returns what it wrapped.

    ``xm.mark_step``, ``MpDeviceLoader`` and ``xp.StepTrace`` all call ``torch_xla.sync``, so
    every step boundary is seen without changing user code. One training iteration is one step:
    see ``StepEnds`` for which syncs end one, and ``Session.boundary`` for syncs that ran no
    graph. The thread's CPU clock is read as the
    call enters, so the step's host CPU splits into the user's code (with its tracing) and
    torch_xla's work in the sync.

    A sync that is already another session's wrapper (``xlaprof.profile()`` inside a script
    run under ``xlaprof run``, or one ``profile()`` inside another) is wrapped in turn, so both
    sessions see every sync; each judges the sync by the first caller outside the wrappers.
    A finished session's wrapper passes calls straight through.

    While graphs are taken from the live tensors (``session.graph_capture.live``, see
    ``capture.graphcapture``) they are taken around the sync itself.
    """
    original = torch_xla.sync
    ends = StepEnds()

    def sync(*args: Any, **kwargs: Any) -> Any:
        entered = thread_time()  # the step's CPU up to here is the user's code and its tracing
        entered_wall = perf_counter()
        entered_wait = session.run_queue_wait() if session.recording else None
        live = session.graph_capture  # taking graphs around this sync, or None
        if live is None or live.live is None or not session.recording or os.getpid() != session.pid:
            live = None
        if live is not None:
            entered = live.before_sync(entered)  # its cost is not the step's
        result = original(*args, **kwargs)
        if session.recording and os.getpid() == session.pid:
            if live is not None:
                live.after_sync(session.step_label())
            if not session.user_steps:
                frame = _caller(sys._getframe(1))
                grad = _grad_enabled()
                graph_required = ends.decide(frame, grad)
                del frame
                if graph_required is not None:
                    before = session.step_index
                    session.boundary(
                        graph_required=graph_required,
                        sync_entered_cpu=entered,
                        sync_entered_wall=entered_wall,
                        sync_entered_wait=entered_wait,
                    )
                    ends.ended(session.step_index != before, graph_required, grad)
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
