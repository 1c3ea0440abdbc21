"""Injected by ``xlaprof run`` through PYTHONPATH into every Python process of the job.

It does nothing until ``torch_xla`` is imported; then it starts a profiling session for this
process (so ``torch_xla.launch``/``xmp.spawn`` children each get their own run directory). Any
other ``sitecustomize`` on the path still runs. Not a public module.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain_other_sitecustomize() -> None:
    paths = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


class _TorchXlaImportHook(importlib.abc.MetaPathFinder):
    """Runs ``_on_import`` right after ``torch_xla`` finishes importing."""

    def __init__(self) -> None:
        self.busy = False

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch_xla" or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
            _on_import()

        # The loader itself is patched (not wrapped), so the module keeps its own loader: an
        # assignment to a method, which the type checker refuses unless told.
        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _launchers_xlaprof() -> None:
    """Import the xlaprof package that launched the job (``XLAPROF_PACKAGE_PARENT``: the
    folder holding it), not whichever one the job's own path finds first: a job whose Python
    has another copy installed (an editable install of another checkout, an older release)
    would otherwise record its run with code other than the command reading it. The folder
    is not put on the job's path, so nothing else in it shadows the job's own modules."""
    parent = os.environ.get("XLAPROF_PACKAGE_PARENT")
    if not parent or "xlaprof" in sys.modules:
        return
    spec = importlib.machinery.PathFinder.find_spec("xlaprof", [parent])
    if spec is None or spec.loader is None:
        return  # the job's own xlaprof, if any, is used
    module = importlib.util.module_from_spec(spec)
    sys.modules["xlaprof"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["xlaprof"]
        raise


def _on_import() -> None:
    try:
        _launchers_xlaprof()
        from xlaprof.capture.hook import start_from_environment

        start_from_environment()
    except Exception as error:
        print(f"xlaprof: profiling disabled in this process: {error}", file=sys.stderr)


if os.environ.get("XLAPROF_RUN_OUT"):
    # XLA_METRICS_SAMPLES is already in the environment: ``xlaprof run`` sets it for the job
    # (see xlaprof.capture.metrics.METRICS_SAMPLES).
    if "torch_xla" in sys.modules:
        _on_import()
    else:
        sys.meta_path.insert(0, _TorchXlaImportHook())
_chain_other_sitecustomize()
