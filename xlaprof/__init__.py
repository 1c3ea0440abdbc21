"""xlaprof: profiling and debugging for PyTorch/XLA.

Public API (imported lazily, so ``import xlaprof`` costs nothing until used):

* annotations: ``region``, ``step``, ``steps``, ``annotate_module``, ``enable_annotations``
* capture: ``profile`` (a context manager around a training loop)
* analysis: ``load_run``, ``load_runs``, ``analyze``
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "region": "xlaprof.annotate",
    "step": "xlaprof.annotate",
    "steps": "xlaprof.annotate",
    "annotate_module": "xlaprof.annotate",
    "enable_annotations": "xlaprof.annotate",
    "profile": "xlaprof.profiling",
    "load_run": "xlaprof.run",
    "load_runs": "xlaprof.run",
    "Run": "xlaprof.run",
    "Finding": "xlaprof.findings",
    "analyze": "xlaprof.api",
    "load_trace": "xlaprof.trace",
    "Analysis": "xlaprof.notebook",
}

if TYPE_CHECKING:
    from xlaprof.annotate import annotate_module, enable_annotations, region, step, steps
    from xlaprof.api import analyze
    from xlaprof.findings import Finding
    from xlaprof.notebook import Analysis
    from xlaprof.profiling import profile
    from xlaprof.run import Run, load_run, load_runs
    from xlaprof.trace import load_trace


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'xlaprof' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*_EXPORTS, "__version__"])


__all__ = [
    "Analysis",
    "Finding",
    "Run",
    "analyze",
    "annotate_module",
    "enable_annotations",
    "load_run",
    "load_runs",
    "load_trace",
    "profile",
    "region",
    "step",
    "steps",
]
