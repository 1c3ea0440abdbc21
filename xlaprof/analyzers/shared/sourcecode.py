"""Reading the user's own source to name things the graph only knows by line number.

Given the lines a repeated block came from, find the class whose method holds them (``Block``),
the attribute holding a list of those (``self.blocks = nn.ModuleList([Block() ...])``), and the
loop that applies them (``for blk in self.blocks:``). The files come from the analyzer's input
(``AnalysisInput.sources``: only those the request allows). Source files may be missing (a
capture analyzed on another machine): every function here then returns None rather than
guessing.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

from xlaprof.model.sources import SourceFiles

log = logging.getLogger(__name__)

_CONTAINERS = ("ModuleList", "Sequential")
# The kinds of statement ``_innermost`` looks for: a loop, a function.
_Statement = TypeVar("_Statement", bound=ast.stmt)


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


def source_line(sources: SourceFiles, file: str, line: int) -> str | None:
    """The text of one source line, stripped, if the file may be read (``SourceFiles``)."""
    return sources.line(file, line)


def enclosing_class(sources: SourceFiles, file: str, line: int) -> str | None:
    """The class whose body (at any depth) holds ``line``."""
    tree = sources.tree(file)
    if tree is None:
        return None
    found: ast.ClassDef | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef) or not node.lineno <= line <= (node.end_lineno or 0):
            continue
        if found is None or node.lineno > found.lineno:  # innermost
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


def _container_name(call: ast.AST | None) -> str | None:
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


def find_layer_stack(sources: SourceFiles, files: list[str], layer_class: str) -> LayerStack | None:
    """The ModuleList/Sequential of ``layer_class`` in ``files`` and the loop that applies it."""
    for file in files:
        tree = sources.tree(file)
        if tree is None:
            continue
        for owner in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for node in ast.walk(owner):
                if not isinstance(node, ast.Assign | ast.AnnAssign):
                    continue
                value = node.value
                container = _container_name(value)
                if value is None or container is None or not _calls_class(value, layer_class):
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


def _assigned_names(node: ast.AST) -> set[str]:
    """Names bound by an assignment or a for loop's target."""
    if isinstance(node, ast.Assign):
        targets: list[ast.AST] = list(node.targets)
    elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.For):
        targets = [node.target]
    else:
        return set()
    return {
        name.id
        for target in targets
        for name in ast.walk(target)
        if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store)
    }


def _innermost(tree: ast.AST, line: int, kinds: tuple[type[_Statement], ...]) -> _Statement | None:
    found: _Statement | None = None
    for node in ast.walk(tree):
        if not isinstance(node, kinds):
            continue
        inside = node.lineno <= line <= (node.end_lineno or node.lineno)
        if inside and (found is None or node.lineno >= found.lineno):
            found = node
    return found


def _statements_binding(tree: ast.AST, names: set[str]) -> Iterator[tuple[ast.stmt, set[str]]]:
    """Each statement under ``tree`` that binds any of ``names``, with the ones it binds."""
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            bound = _assigned_names(node) & names
            if bound:
                yield node, bound


def loop_reassignment(
    sources: SourceFiles, file: str, created_line: int, cut_line: int
) -> int | None:
    """The line inside the loop around ``cut_line`` that rebinds the name bound at
    ``created_line`` (``tokens = torch.cat([tokens, nxt], 1)``), if any.

    A tensor made before a loop and rebound in it gets each later value (and shape) from the
    rebinding, so that line, not the first one, is where a changing input comes from. A
    rebinding that reads the name itself (a growing update) is preferred.
    """
    tree = sources.tree(file)
    if tree is None:
        return None
    names: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) == created_line:
            names |= _assigned_names(node)
    loop = _innermost(tree, cut_line, (ast.For, ast.While))
    if not names or loop is None or loop.lineno <= created_line <= (loop.end_lineno or 0):
        return None
    rebinding = []
    for node, bound in _statements_binding(loop, names):
        if isinstance(node, ast.For):
            continue
        value = getattr(node, "value", None)
        reads = value is not None and any(
            isinstance(n, ast.Name) and n.id in bound for n in ast.walk(value)
        )
        rebinding.append((not reads, node.lineno))
    return min(rebinding)[1] if rebinding else None


def argument_origin(sources: SourceFiles, file: str, call_line: int, index: int) -> int | None:
    """Where the ``index``-th argument of the call at ``call_line`` was last bound.

    For ``loss = step_fn(x)``: the latest ``x = ...`` (or ``for x in ...``) before it in the
    same function. None when the line is a loop header (the value comes from the iteration
    itself), when the argument is not a plain name, or when the source is unreadable.
    """
    tree = sources.tree(file)
    if tree is None:
        return None
    calls: list[tuple[int, str]] = []  # each call's column and the argument's name
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and node.lineno == call_line:
            return None
        if (
            isinstance(node, ast.Call)
            and node.lineno <= call_line <= (node.end_lineno or node.lineno)
            and len(node.args) > index
        ):
            argument = node.args[index]
            if isinstance(argument, ast.Name):
                calls.append((node.col_offset, argument.id))
    if not calls:
        return None
    name = min(calls, key=lambda call: call[0])[1]  # the leftmost call (the first if tied)
    scope = _innermost(tree, call_line, (ast.FunctionDef, ast.AsyncFunctionDef)) or tree
    bound = [node.lineno for node, _ in _statements_binding(scope, {name})]
    bound = [line for line in bound if line < call_line]
    return max(bound) if bound else None


def enclosing_loop(sources: SourceFiles, file: str, line: int) -> int | None:
    """The header line of the innermost ``for``/``while`` loop whose body holds ``line``."""
    tree = sources.tree(file)
    if tree is None:
        return None
    loop = _innermost(tree, line, (ast.For, ast.While))
    if loop is None or loop.lineno == line:
        return None
    return loop.lineno


def time_loop_sketch(sources: SourceFiles, file: str, call_line: int) -> str | None:
    """A ``scan`` rewrite of the time loop around ``h = self.cell(seq[:, t], h)``.

    The carried variable is the name the call assigns and also reads (``h``); ``xs`` is the
    argument indexed by the loop variable, moved so that the indexed dimension comes first.
    None when the line is not of that shape: the suggestion then stays in words.
    """
    tree = sources.tree(file)
    if tree is None:
        return None
    loop = _innermost(tree, call_line, (ast.For,))
    assign = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Assign) and n.lineno == call_line and isinstance(n.value, ast.Call)
        ),
        None,
    )
    if loop is None or assign is None or not isinstance(loop.target, ast.Name):
        return None
    assert isinstance(assign.value, ast.Call)
    call = assign.value
    step_var = loop.target.id
    targets = sorted(_assigned_names(assign))
    reads = {n.id for arg in call.args for n in ast.walk(arg) if isinstance(n, ast.Name)}
    carried = [t for t in targets if t in reads] or targets
    if not carried:
        return None
    xs_expr = None
    arguments: list[ast.expr] = []
    for arg in call.args:
        if xs_expr is None and isinstance(arg, ast.Subscript):
            parts = arg.slice.elts if isinstance(arg.slice, ast.Tuple) else [arg.slice]
            dims = [i for i, p in enumerate(parts) if isinstance(p, ast.Name) and p.id == step_var]
            if dims:
                base = ast.unparse(arg.value)
                xs_expr = base if dims[0] == 0 else f"{base}.movedim({dims[0]}, 0)"
                arguments.append(ast.Name("x_t"))
                continue
        arguments.append(arg)
    if xs_expr is None:
        return None
    module = ast.unparse(call.func)
    new_call = ast.Call(
        func=ast.Name("functional_call"),
        args=[call.func, ast.Name("params"), ast.Tuple(arguments)],
        keywords=call.keywords,
    )
    carry = carried[0]
    return (
        "    from torch.func import functional_call\n"
        "    from torch_xla.experimental.scan import scan\n\n"
        f"    params = dict({module}.named_parameters())\n\n"
        f"    def step(carry, x_t):\n"
        f"        {carry}, params = carry\n"
        f"        {carry} = {ast.unparse(new_call)}\n"
        f"        return ({carry}, params), {carry}   # new carry, and this step's output\n\n"
        f"    ({carry}, _), outputs = scan(step, ({carry}, params), {xs_expr})"
        f"   # replaces the loop at line {loop.lineno}"
    )


def enclosing_function(sources: SourceFiles, file: str, line: int) -> str | None:
    """The name of the innermost function whose body holds ``line``."""
    tree = sources.tree(file)
    if tree is None:
        return None
    function = _innermost(tree, line, (ast.FunctionDef, ast.AsyncFunctionDef))
    return getattr(function, "name", None)


def loop_call_of(sources: SourceFiles, file: str, line: int, function: str) -> int | None:
    """The line in the loop around ``line`` that calls ``function`` (``make_batch(...)``)."""
    tree = sources.tree(file)
    if tree is None:
        return None
    loop = _innermost(tree, line, (ast.For, ast.While))
    if loop is None:
        return None
    for node in ast.walk(loop):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name == function:
                return node.lineno
    return None


def _returns_pair(function: ast.FunctionDef) -> bool:
    """Whether ``function`` itself returns a tuple of 2 or 3 items: (model, batch[, loss_fn])."""
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue  # a nested function's returns are not this one's
        value = node.value if isinstance(node, ast.Return) else None
        if isinstance(value, ast.Tuple) and 2 <= len(value.elts) <= 3:
            return True
        pending.extend(ast.iter_child_nodes(node))
    return False


def _runs_on_import(tree: ast.Module) -> bool:
    """Whether importing the module trains: a loop at top level, or a top-level call of one of
    its own functions (``main()`` outside ``if __name__ == "__main__":``). Set-up calls such as
    ``torch.manual_seed(0)`` or ``os.environ.setdefault(...)`` do not count."""
    own = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    for node in tree.body:
        if isinstance(node, ast.For | ast.While | ast.AsyncFor):
            return True
        call = node.value if isinstance(node, ast.Expr | ast.Assign) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in own:
            return True
    return False


def bench_factory(sources: SourceFiles, script: str | None) -> str | None:
    """A function of ``script`` that ``xlaprof bench`` can take as its factory, if there is one.

    The factory contract (fixes/target.py): callable with no arguments, returning
    ``(model, batch)`` or ``(model, batch, loss_fn)``; and importing the script must not train
    (its loop under ``if __name__ == "__main__":``). Only a top-level function that takes no
    required argument and returns a 2- or 3-item tuple is named; the first one defined wins.
    None when the script is unreadable here, runs on import, or has no such function.
    """
    if not script:
        return None
    tree = sources.tree(script)
    if tree is None or _runs_on_import(tree):
        return None
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.name == "main":
            continue
        arguments = node.args
        required = len(arguments.posonlyargs) + len(arguments.args) - len(arguments.defaults)
        required += sum(d is None for d in arguments.kw_defaults)
        if required == 0 and _returns_pair(node):
            return node.name
    return None


@dataclass(frozen=True)
class LoopCall:
    """The statement of a ``for layer in self.layers:`` loop that calls the loop variable.

    ``hidden, _probs = layer(hidden, mask)`` gives targets ``("hidden", "_probs")``, args
    ``("hidden", "mask")``; each argument is its source text.
    """

    line: int
    targets: tuple[str, ...]
    args: tuple[str, ...]
    keywords: tuple[tuple[str, str], ...]


def loop_call(sources: SourceFiles, file: str, loop_line: int) -> LoopCall | None:
    """The call of the loop variable in the body of the ``for`` loop at ``loop_line``."""
    tree = sources.tree(file)
    if tree is None:
        return None
    loop = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.For) and n.lineno == loop_line), None
    )
    if loop is None or not isinstance(loop.target, ast.Name):
        return None
    variable = loop.target.id
    for statement in loop.body:
        value = statement.value if isinstance(statement, ast.Assign | ast.Expr) else None
        if not (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == variable
        ):
            continue
        targets: tuple[str, ...] = ()
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            parts = target.elts if isinstance(target, ast.Tuple) else [target]
            names = [p for p in parts if isinstance(p, ast.Name)]
            if len(names) == len(parts):
                targets = tuple(p.id for p in names)
        if any(isinstance(a, ast.Starred) for a in value.args) or any(
            k.arg is None for k in value.keywords
        ):
            return None  # *args / **kwargs: the call's shape is not in the text
        return LoopCall(
            line=statement.lineno,
            targets=targets,
            args=tuple(ast.unparse(a) for a in value.args),
            keywords=tuple((str(k.arg), ast.unparse(k.value)) for k in value.keywords),
        )
    return None


def calls_with_true(sources: SourceFiles, file: str, function: str) -> list[int]:
    """Lines of ``file`` calling ``function`` (by its last name) with ``True`` as the first
    argument, e.g. ``torch_xla.experimental.eager_mode(True)``; [] if the file is unreadable."""
    tree = sources.tree(file)
    if tree is None:
        return []
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if isinstance(node.func, ast.Name):
            name = node.func.id
        first = node.args[0]
        if name == function and isinstance(first, ast.Constant) and first.value is True:
            lines.append(node.lineno)
    return sorted(lines)
