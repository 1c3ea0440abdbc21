"""xlaprof: profiling and debugging for PyTorch/XLA.

Public API (imported lazily, so ``import xlaprof`` costs nothing until used):

* annotations: ``region``, ``step``, ``steps``, ``annotate_module``, ``enable_annotations``
* capture: ``profile`` (a context manager around a training loop)
* analysis: ``load_run``, ``load_runs``, ``analyze``, ``check`` (budgets, for CI)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "region": "xlaprof.capture.annotate",
    "step": "xlaprof.capture.annotate",
    "steps": "xlaprof.capture.annotate",
    "annotate_module": "xlaprof.capture.annotate",
    "enable_annotations": "xlaprof.capture.annotate",
    "profile": "xlaprof.capture.profile",
    "load_run": "xlaprof.rundir.reader",
    "load_runs": "xlaprof.rundir.reader",
    "Run": "xlaprof.rundir.reader",
    "Finding": "xlaprof.findings",
    "analyze": "xlaprof.api",
    "check": "xlaprof.api",
    "Analysis": "xlaprof.api",
}

if TYPE_CHECKING:
    from xlaprof.api import Analysis, analyze, check
    from xlaprof.capture.annotate import annotate_module, enable_annotations, region, step, steps
    from xlaprof.capture.profile import profile
    from xlaprof.findings import Finding
    from xlaprof.model.trace import Trace
    from xlaprof.rundir.reader import Run, load_run, load_runs


def load_trace(path: Any, *args: Any, **settings: Any) -> Trace:
    """Load a capture (``xlaprof.inputs.traces.load_trace``: its arguments), a capture of
    several hosts read as the environment says (``$XLAPROF_LAZY_BYTES``,
    ``$XLAPROF_DASK_SCHEDULER``, ``$XLAPROF_DASK_TIMEOUT``, ``$XLAPROF_CACHE_DIR``): read here,
    where the caller comes in, as the commands read it, unless ``pod`` is given."""
    import os

    from xlaprof.inputs.traces import load_trace as load
    from xlaprof.model.request import PodSettings

    settings.setdefault("pod", PodSettings.of(os.environ))
    return load(path, *args, **settings)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'xlaprof' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*_EXPORTS, "load_trace", "__version__"])


__all__ = [
    "Analysis",
    "Finding",
    "Run",
    "analyze",
    "annotate_module",
    "check",
    "enable_annotations",
    "load_run",
    "load_runs",
    "load_trace",
    "profile",
    "region",
    "step",
    "steps",
]
