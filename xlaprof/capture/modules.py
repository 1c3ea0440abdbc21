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

import ast
import contextlib
import linecache
import sys
from collections import defaultdict
from collections.abc import Callable
from typing import Any

_MODULE_CALL_FILE = "/torch/nn/modules/module.py"
# Sequential.forward: the loop applying a Sequential's children is torch's, the stack's own
# caller is the code that applies it.
_CONTAINER_FILE = "/torch/nn/modules/container.py"
_CONTAINERS = ("ModuleList", "Sequential", "ModuleDict")
MAX_SITES = 4
MAX_CHILDREN = 4096
# Steps without a forward skipped before the window is written anyway (empty).
MAX_WINDOW_STEPS = 16
# A signature names at most this many arguments, and tuple kinds this many items.
MAX_ARGUMENTS = 32


def kind_of(value: Any, depth: int = 0) -> str:
    """A call argument or output in words: ``tensor`` (floating point), ``tensor:torch.int64``,
    ``None``, ``bool``, ``tuple(tensor,tensor)``, or the class name of anything else."""
    import torch

    if isinstance(value, torch.Tensor):
        return "tensor" if value.is_floating_point() else f"tensor:{value.dtype}"
    if value is None:
        return "None"
    if isinstance(value, tuple | list) and depth < 2:
        items = ",".join(kind_of(v, depth + 1) for v in list(value)[:MAX_ARGUMENTS])
        return f"tuple({items})"
    return type(value).__name__


def _loop_header(file: str, line: int) -> int | None:
    """The header line of the innermost for/while loop around ``line`` in ``file``.

    Read from the source the process is running (``linecache``), once per stack at the end of
    the window: a library's loop is named by its line even where analysis cannot read it.
    """
    try:
        tree = ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found = None
    for node in ast.walk(tree):
        inside = isinstance(node, ast.For | ast.While) and (
            node.lineno < line <= (node.end_lineno or node.lineno)
        )
        if inside and (found is None or node.lineno >= found.lineno):
            found = node
    return None if found is None else found.lineno


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
        # the line calling each module directly (file:line -> the calling function's name)
        self.callers: dict[int, dict[str, str]] = defaultdict(dict)
        self.signatures: dict[int, dict[str, Any]] = {}
        self.handles: list[Any] = []
        self.compiling: Any = None
        self.skipped_steps = 0

    def start(self) -> None:
        import torch

        self.compiling = getattr(torch.compiler, "is_compiling", lambda: False)
        hooks = torch.nn.modules.module
        self.handles = [
            hooks.register_module_forward_pre_hook(self._hook),
            hooks.register_module_forward_hook(self._output_hook, with_kwargs=True),
        ]

    def stop(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def step_ended(self) -> bool:
        """True when the window is complete (write it now): the step that ended ran a forward.

        A step that called no module with children is forgotten, and recording goes on into
        the next step; after ``MAX_WINDOW_STEPS`` such steps the window ends anyway.
        """
        if any(next(iter(m.children()), None) is not None for m in self.modules.values()):
            return True
        self.skipped_steps += 1
        if self.skipped_steps >= MAX_WINDOW_STEPS:
            return True
        for table in (self.calls, self.sites, self.modules, self.callers, self.signatures):
            table.clear()
        return False

    def _hook(self, module: Any, _inputs: Any) -> None:
        if self.compiling():
            return
        with contextlib.suppress(Exception):  # a profiler must never break a forward
            self._record(module)

    def _output_hook(self, module: Any, args: Any, kwargs: Any, output: Any) -> None:
        """The first call's signature: argument kinds, keyword names and kinds, output kind."""
        if id(module) in self.signatures or self.compiling():
            return
        with contextlib.suppress(Exception):
            self.signatures[id(module)] = {
                "args": [kind_of(a) for a in list(args)[:MAX_ARGUMENTS]],
                "kwargs": {str(k): kind_of(v) for k, v in list(kwargs.items())[:MAX_ARGUMENTS]},
                "output": kind_of(output),
            }

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
        callers = self.callers[key]
        if frame is not None and len(callers) < MAX_SITES:
            code = frame.f_code
            function = getattr(code, "co_qualname", code.co_name)
            module = frame.f_globals.get("__name__", "")
            callers.setdefault(f"{code.co_filename}:{frame.f_lineno}", f"{module}|{function}")
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
                    **self._applied(key, kids),
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

    def _applied(self, key: int, kids: list[Any]) -> dict[str, Any]:
        """How the stack's children are called: the first one's signature (``call``), and the
        code applying them (``applied_by``: the loop calling each child, or for a Sequential
        the line calling the Sequential), with its function, module, loop line, and whether it
        is a library's."""
        entry: dict[str, Any] = {}
        first = next((c for c in kids if id(c) in self.signatures), None)
        if first is not None:
            entry["call"] = self.signatures[id(first)]
        callers = next((self.callers[id(c)] for c in kids if self.callers.get(id(c))), {})
        if callers and next(iter(callers)).rpartition(":")[0].endswith(_CONTAINER_FILE):
            callers = self.callers.get(key, {})
        if callers:
            where, named = next(iter(callers.items()))
            file, _, line = where.rpartition(":")
            module, _, function = named.partition("|")
            entry["applied_by"] = {
                "file": file,
                "line": int(line),
                "function": function,
                "module": module,
                "loop_line": _loop_header(file, int(line)),
                "library": self.is_library(file),
            }
        return entry

    def _sites(self, key: int) -> list[dict[str, Any]]:
        return [{"where": w, "direct": d} for w, d in self.sites.get(key, {}).items()]
