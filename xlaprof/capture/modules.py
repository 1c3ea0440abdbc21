"""The live module tree and who calls which module, recorded once, for the unrolled-loop analysis.

A compiled graph knows each op only by its innermost source line, which for a layer built from
torch modules (``self.act(self.fc(x))``, an ``nn.Sequential`` of ``Linear``/``GELU``) lies in
``torch/nn/modules``: the graph alone cannot name the stack or the loop that unrolled it. The
live process can. During the second step (the session starts it after a first step in which
dynamo compiled nothing) a global forward pre-hook
(``torch.nn.modules.module.register_module_forward_pre_hook``) counts each module's calls and
notes the user's source line that called it; at the end of that step the hook is removed and the
module tree under the called modules is walked for ``ModuleList``/``Sequential`` containers.
Written to ``modules.json``: plain data, no torch objects.

Cost: one Python call per module call during one step, then nothing. A global hook is part of
what dynamo guards on, so the session drops the recorder as soon as dynamo starts compiling,
and the hook returns at once while dynamo traces (``torch.compiler.is_compiling``).
"""

from __future__ import annotations

import contextlib
import sys
from collections import defaultdict
from collections.abc import Callable
from typing import Any

_MODULE_CALL_FILE = "/torch/nn/modules/module.py"
_CONTAINERS = ("ModuleList", "Sequential", "ModuleDict")
MAX_SITES = 4
MAX_CHILDREN = 4096


def _param_signature(module: Any) -> str:
    """The parameters' shapes in order: equal for layers that scan_layers could stack."""
    return ";".join("x".join(map(str, p.shape)) for p in module.parameters(recurse=True))


def _class_file(module: Any) -> str | None:
    """The source file of the module's class (``.../torch/nn/modules/rnn.py``), if known."""
    return getattr(sys.modules.get(type(module).__module__), "__file__", None)


class ModuleRecorder:
    """Counts module calls and their user call sites until ``stop()``; then ``summary()``."""

    def __init__(self, is_library: Callable[[str], bool]) -> None:
        self.is_library = is_library
        self.calls: dict[int, int] = defaultdict(int)
        self.sites: dict[int, dict[str, bool]] = defaultdict(dict)
        self.modules: dict[int, Any] = {}
        self.handle: Any = None
        self.compiling: Any = None

    def start(self) -> None:
        import torch

        self.compiling = getattr(torch.compiler, "is_compiling", lambda: False)
        self.handle = torch.nn.modules.module.register_module_forward_pre_hook(self._hook)

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None

    def _hook(self, module: Any, _inputs: Any) -> None:
        if self.compiling():
            return
        with contextlib.suppress(Exception):  # a profiler must never break a forward
            self._record(module)

    def _record(self, module: Any) -> None:
        key = id(module)
        self.modules[key] = module
        self.calls[key] += 1
        sites = self.sites[key]
        if len(sites) >= MAX_SITES:
            return
        frame: Any = sys._getframe(1)
        while frame is not None and (
            frame.f_code.co_filename == __file__
            or frame.f_code.co_filename.endswith(_MODULE_CALL_FILE)
        ):
            frame = frame.f_back
        direct = frame is not None and not self.is_library(frame.f_code.co_filename)
        while frame is not None and self.is_library(frame.f_code.co_filename):
            frame = frame.f_back
        if frame is not None:
            where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
            sites.setdefault(where, direct)
        del frame

    def summary(self) -> dict[str, Any]:
        """Modules called more than once, and every ModuleList/Sequential under the called ones."""
        inside = {id(d) for m in self.modules.values() for d in m.modules() if d is not m}
        roots = [m for key, m in self.modules.items() if key not in inside]
        names: dict[int, str] = {}
        parents: dict[int, tuple[int, str]] = {}
        by_id: dict[int, Any] = {}
        for number, root in enumerate(roots):
            prefix = f"<root{number}>" if len(roots) > 1 else ""
            for name, module in root.named_modules(remove_duplicate=True):
                by_id.setdefault(id(module), module)
                names.setdefault(id(module), ".".join(p for p in (prefix, name) if p) or "<root>")
                for attribute, child in module.named_children():
                    parents.setdefault(id(child), (id(module), attribute))
        repeated = [
            {
                "name": names.get(key),
                "class": type(module).__name__,
                "file": _class_file(module),
                "calls": self.calls[key],
                "sites": self._sites(key),
            }
            for key, module in self.modules.items()
            if self.calls[key] >= 2
        ]
        stacks = []
        for key, module in by_id.items():
            if not any(c.__name__ in _CONTAINERS for c in type(module).__mro__):
                continue
            kids = [c for _n, c in module.named_children()][:MAX_CHILDREN]
            if len(kids) < 2:
                continue
            parent = parents.get(key)
            owner = by_id.get(parent[0]) if parent else None
            child_sites: dict[str, bool] = {}
            for child in kids:
                for where, direct in self.sites.get(id(child), {}).items():
                    if len(child_sites) < MAX_SITES:
                        child_sites.setdefault(where, direct)
            stacks.append(
                {
                    "name": names.get(key),
                    "class": type(module).__name__,
                    "owner_class": None if owner is None else type(owner).__name__,
                    "attribute": None if parent is None else parent[1],
                    "children": [
                        {
                            "class": type(c).__name__,
                            "file": _class_file(c),
                            "params": _param_signature(c),
                        }
                        for c in kids
                    ],
                    "calls": self.calls.get(key, 0),
                    "sites": self._sites(key),
                    "child_sites": [{"where": w, "direct": d} for w, d in child_sites.items()],
                }
            )
        self.modules.clear()
        return {"repeated": repeated, "stacks": stacks}

    def _sites(self, key: int) -> list[dict[str, Any]]:
        return [{"where": w, "direct": d} for w, d in self.sites.get(key, {}).items()]
