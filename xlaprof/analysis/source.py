"""Reading the user's own source to name things the graph only knows by line number.

Given the lines a repeated block came from, find the class whose method holds them (``Block``),
the attribute holding a list of those (``self.blocks = nn.ModuleList([Block() ...])``), and the
loop that applies them (``for blk in self.blocks:``). Source files may be missing (a capture
analyzed on another machine): every function here then returns None rather than guessing.
"""

from __future__ import annotations

import ast
import functools
import logging
from dataclasses import dataclass
from pathlib import Path

from xlaprof.analysis.sourcefiles import current_roots, read_source

log = logging.getLogger(__name__)

_CONTAINERS = ("ModuleList", "Sequential")


@dataclass(frozen=True)
class LayerStack:
    """Where a stack of identical layers lives in the user's code."""

    layer_class: str
    owner_class: str | None
    attribute: str
    container: str  # ModuleList or Sequential
    file: str
    defined_line: int  # the ModuleList/Sequential assignment
    loop_line: int | None  # the for loop (or the call, for Sequential)
    owner_method: str | None  # the method holding the loop, e.g. "forward"


def _tree(file: str) -> ast.Module | None:
    return _parsed(file, current_roots())


@functools.lru_cache(maxsize=64)
def _parsed(file: str, roots: tuple[Path, ...]) -> ast.Module | None:
    text = read_source(file, roots)  # None outside the source roots (sourcefiles.py)
    if text is None:
        return None
    try:
        return ast.parse(text, filename=file)
    except (SyntaxError, ValueError, RecursionError) as error:
        log.debug("no syntax tree for %s: %s", file, error)
        return None


def source_line(file: str, line: int) -> str | None:
    """The text of one source line, stripped, if the file may be read (see sourcefiles.py)."""
    return _source_line(file, line, current_roots())


@functools.lru_cache(maxsize=64)
def _source_line(file: str, line: int, roots: tuple[Path, ...]) -> str | None:
    text = read_source(file, roots)
    if text is None:
        log.debug("source line %s:%s not readable here", file, line)
        return None
    lines = text.split("\n")
    return lines[line - 1].strip() if 0 < line <= len(lines) else None


def enclosing_class(file: str, line: int) -> str | None:
    """The class whose body (at any depth) holds ``line``."""
    tree = _tree(file)
    if tree is None:
        return None
    found = None
    for node in ast.walk(tree):
        inside = isinstance(node, ast.ClassDef) and node.lineno <= line <= (node.end_lineno or 0)
        if inside and (found is None or node.lineno > found.lineno):  # innermost
            found = node
    return None if found is None else found.name


def _calls_class(node: ast.AST, class_name: str) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call):
            func = inner.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name == class_name:
                return True
    return False


def _container_name(call: ast.AST) -> str | None:
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return name if name in _CONTAINERS else None


def _iterates(node: ast.For, attribute: str) -> bool:
    for inner in ast.walk(node.iter):
        if isinstance(inner, ast.Attribute) and inner.attr == attribute:
            return True
    return False


def find_layer_stack(files: list[str], layer_class: str) -> LayerStack | None:
    """The ModuleList/Sequential of ``layer_class`` in ``files`` and the loop that applies it."""
    for file in files:
        tree = _tree(file)
        if tree is None:
            continue
        for owner in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for node in ast.walk(owner):
                if not isinstance(node, ast.Assign | ast.AnnAssign):
                    continue
                container = _container_name(node.value)
                if container is None or not _calls_class(node.value, layer_class):
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                attribute = next((t.attr for t in targets if isinstance(t, ast.Attribute)), None)
                if attribute is None:
                    continue
                loop_line, method = _loop_over(owner, attribute, container)
                return LayerStack(
                    layer_class=layer_class,
                    owner_class=owner.name,
                    attribute=attribute,
                    container=container,
                    file=file,
                    defined_line=node.lineno,
                    loop_line=loop_line,
                    owner_method=method,
                )
    return None


def _loop_over(
    owner: ast.ClassDef, attribute: str, container: str
) -> tuple[int | None, str | None]:
    for method in (n for n in owner.body if isinstance(n, ast.FunctionDef)):
        for node in ast.walk(method):
            if isinstance(node, ast.For) and _iterates(node, attribute):
                return node.lineno, method.name
            if (
                container == "Sequential"
                and isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == attribute
            ):
                return node.lineno, method.name
    return None, None
