"""User code annotations: regions, steps and per-module regions.

``region(name)`` emits a profiler TraceMe so the region shows up in captured traces, and adds its
host wall time to the active profiling session. It uses the TraceMe that ``xp.Trace`` is built
on, without the IR scope ``xp.Trace`` also pushes: that scope makes any ``torch_xla.sync()``
inside the region fail ("Expecting scope to be empty") and writes the region name into the HLO
metadata, so it could change graphs. ``step(n)`` and
``steps(iterable)`` mark step boundaries with StepTrace semantics (``_r=1, step_num=n``, which is
what XProf groups steps by) but, unlike ``xp.StepTrace``, never call ``torch_xla.sync()``:
annotations must not cut graphs, add syncs or compilations.

When no session is active (and ``XLAPROF_ANNOTATE`` is unset) every annotation returns after one
attribute check, so they can stay in production code.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from torch import nn

T = TypeVar("T")


class Recorder(Protocol):
    """What annotations report to: the active profiling session (``capture.session``)."""

    def record_region(self, name: str, seconds: float) -> None: ...

    def begin_user_step(self, number: int) -> None: ...

    def end_user_step(self, number: int) -> None: ...


class _State:
    """Process-wide annotation state: the active session and whether to emit TraceMes."""

    __slots__ = ("emit", "session", "trace_cls")

    def __init__(self) -> None:
        self.session: Recorder | None = None
        self.emit = os.environ.get("XLAPROF_ANNOTATE", "") not in ("", "0")
        self.trace_cls: Any = None


STATE = _State()


class _NoTrace:
    """Stands in for a TraceMe that could not be created (the region is still timed)."""

    def __exit__(self, *exc: object) -> None:
        return None


_NO_TRACE = _NoTrace()


def _trace_class() -> Any:
    if STATE.trace_cls is None:
        from xlaprof.capture.runtime import runtime

        STATE.trace_cls = runtime().trace_me()
    return STATE.trace_cls


# The TraceMe a session puts over each step it counts (``Session``): StepTrace semantics, the
# step's number as ``steps.jsonl`` has it, so any capture of the job (a trace window, or
# ``xlaprof capture`` from another machine) numbers its steps as the job does.
SESSION_STEP = "xlaprof_step"


def open_step_trace(number: int) -> Any:
    """Start a session step's TraceMe (recorded only if a capture is running now and still is
    when it is closed); None if the profiler cannot make one."""
    try:
        trace = _trace_class()(SESSION_STEP, _r=1, step_num=number)
        trace.__enter__()
    except Exception:  # the profiler must never reach the training job
        return None
    return trace


def close_step_trace(trace: Any) -> None:
    with contextlib.suppress(Exception):
        trace.__exit__(None, None, None)


def enable_annotations(enabled: bool = True) -> None:
    """Emit TraceMes even with no xlaprof session (for captures by other tools)."""
    STATE.emit = enabled


def set_session(session: Recorder | None) -> None:
    STATE.session = session


class region(contextlib.ContextDecorator):
    """Context manager and decorator naming a region of host code.

    >>> with xlaprof.region("data"):          # doctest: +SKIP
    ...     batch = next(loader)
    """

    __slots__ = ("_start", "_trace", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._trace: Any = None
        self._start = 0.0

    def _recreate_cm(self) -> region:
        # As a decorator, each call needs its own timer and TraceMe (recursion, threads).
        return region(self.name)

    def __enter__(self) -> region:
        if STATE.session is None and not STATE.emit:
            return self
        try:
            trace = _trace_class()(self.name)
            trace.__enter__()
        except Exception:  # a profiler failure must not reach user code: time it untraced
            trace = _NO_TRACE
        self._trace = trace
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        trace = self._trace
        if trace is None:
            return
        elapsed = time.perf_counter() - self._start
        self._trace = None
        with contextlib.suppress(Exception):  # as in __enter__: never into user code
            trace.__exit__(*exc)
        session = STATE.session
        if session is not None:
            session.record_region(self.name, elapsed)


class step:
    """Marks one training step: ``with xlaprof.step(n): ...``.

    In a session, the step ends when the block exits (instead of at each torch_xla.sync()), and
    is numbered ``n``. In the trace it is a StepTrace-style event XProf shows as step ``n``.
    """

    __slots__ = ("_trace", "name", "number")

    def __init__(self, number: int, name: str = "train_step") -> None:
        self.number = number
        self.name = name
        self._trace: Any = None

    def __enter__(self) -> step:
        session = STATE.session
        if session is None and not STATE.emit:
            return self
        if session is not None:
            session.begin_user_step(self.number)
        try:
            trace = _trace_class()(self.name, _r=1, step_num=self.number)
            trace.__enter__()
        except Exception:  # a profiler failure must not reach user code: count the step
            trace = _NO_TRACE
        self._trace = trace
        return self

    def __exit__(self, *exc: object) -> None:
        trace = self._trace
        if trace is None:
            return
        self._trace = None
        with contextlib.suppress(Exception):  # as in __enter__: never into user code
            trace.__exit__(*exc)
        session = STATE.session
        if session is not None:
            session.end_user_step(self.number)


def steps(iterable: Iterable[T], start: int = 0, name: str = "train_step") -> Iterator[T]:
    """Wrap a data loader so each training iteration is one marked step.

    >>> for batch in xlaprof.steps(loader):     # doctest: +SKIP
    ...     train(batch)

    A step is one item's loop body and then the fetch of the next item: a loader that syncs
    as it hands out a batch (``MpDeviceLoader`` calls ``torch_xla.sync()`` in ``next()``)
    runs the graph the body just traced there, so that sync (its compile, its execution)
    belongs to the body's step, not to the next one. The first fetch comes before step
    ``start`` (it ends no step: nothing was traced yet); the last, which finds the loader
    empty, ends the last step.
    """
    iterator = iter(iterable)
    try:
        item = next(iterator)
    except StopIteration:
        return
    number = start
    while True:
        with step(number, name):
            yield item
            try:
                item = next(iterator)
            except StopIteration:
                return
        number += 1


class ModuleAnnotations:
    """Handle returned by ``annotate_module``: ``remove()`` restores every forward."""

    def __init__(self) -> None:
        self._restore: list[Callable[[], None]] = []

    def remove(self) -> None:
        while self._restore:
            self._restore.pop()()

    def __enter__(self) -> ModuleAnnotations:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def annotate_module(model: nn.Module, root_name: str | None = None) -> ModuleAnnotations:
    """Wrap each submodule's forward in a region named by its qualified name, reversibly.

    The root is named ``root_name`` or its class name; children ``blocks.0.attn`` etc.
    """
    handle = ModuleAnnotations()
    root = root_name or type(model).__name__
    for qualified, module in model.named_modules():
        name = qualified or root
        had_own = "forward" in module.__dict__
        original = module.forward
        wrapped = region(name)(original)
        module.forward = wrapped  # instance attribute shadows the class method

        def restore(
            module: nn.Module = module, had_own: bool = had_own, original: Any = original
        ) -> None:
            if had_own:
                module.forward = original
            else:
                module.__dict__.pop("forward", None)

        handle._restore.append(restore)
    return handle
