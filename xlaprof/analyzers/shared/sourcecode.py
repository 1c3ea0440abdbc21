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
    elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.For | ast.AsyncFor):
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


def in_loop_over_data(sources: SourceFiles, file: str, line: int) -> bool:
    """Whether ``line`` is in the body of a ``for`` loop (in its own function) over something
    other than a literal display: ``for i in range(0, n, bptt)`` or ``for batch in loader`` run
    once per batch, ``for name, index in (("train", a), ("val", b))`` a fixed few times."""
    tree = sources.tree(file)
    if tree is None:
        return False
    function = _innermost(tree, line, (ast.FunctionDef, ast.AsyncFunctionDef))
    loop = _innermost(function or tree, line, (ast.For, ast.AsyncFor))
    if loop is None or loop.lineno == line:
        return False
    assert isinstance(loop, (ast.For, ast.AsyncFor))
    return not isinstance(loop.iter, (ast.Tuple, ast.List, ast.Set, ast.Dict))


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _pads_to_longest(call: ast.Call) -> str | None:
    """What makes ``call`` pad a batch to its longest sequence, or None."""
    name = _call_name(call)
    padding = next((k.value for k in call.keywords if k.arg == "padding"), None)
    # (``padding=1`` of a convolution is no padding to the longest: 1 == True in Python)
    if isinstance(padding, ast.Constant) and (padding.value is True or padding.value == "longest"):
        return f"padding={padding.value!r}"
    if name.endswith("CollatorWithPadding"):
        if isinstance(padding, ast.Constant) and padding.value == "max_length":
            return None
        return f'{name} (padding="longest" by default)'
    if name == "pad_sequence":
        return "pad_sequence (to the batch's longest)"
    return None


def padding_call(sources: SourceFiles, file: str) -> tuple[int, str] | None:
    """The line in ``file`` where batches are padded to their longest sequence (a collator, a
    tokenizer call with padding="longest"/True, pad_sequence), and what does it; else the
    DataLoader call that names a collate function; None if neither is there."""
    tree = sources.tree(file)
    if tree is None:
        return None
    collate: tuple[int, str] | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        what = _pads_to_longest(node)
        if what is not None:
            return node.lineno, what
        if collate is None and any(k.arg == "collate_fn" for k in node.keywords):
            # the line is the call that names the collate function, not the function itself
            name = _call_name(node) or "the call"
            collate = node.lineno, f"{name}(collate_fn=...), whose collate function pads"
    return collate


def loop_of_moved_batch(sources: SourceFiles, file: str, line: int) -> int | None:
    """The ``for`` loop header that yields the batch ``line`` moves to the device:
    ``real = real_cpu.to(device)`` or ``batch = {k: v.to(device) for k, v in batch.items()}``
    inside ``for ... real_cpu ... in loader``; None when the line is no such move."""
    tree = sources.tree(file)
    if tree is None:
        return None
    statement = _innermost(tree, line, (ast.Assign,))
    if statement is None:
        return None
    moved: set[str] = set()
    for node in ast.walk(statement.value):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("to", "cuda")
        ):
            moved |= {n.id for n in ast.walk(node.func.value) if isinstance(n, ast.Name)}
        if isinstance(node, ast.comprehension):
            moved |= {n.id for n in ast.walk(node.iter) if isinstance(n, ast.Name)}
    function = _innermost(tree, line, (ast.FunctionDef, ast.AsyncFunctionDef))
    for loop in ast.walk(function or tree):
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        inside = loop.lineno < line <= (loop.end_lineno or loop.lineno)
        if inside and moved & _assigned_names(loop):
            return loop.lineno
    return None


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


@dataclass(frozen=True)
class LoopBody:
    """What a user's ``for`` loop is and what its body does with the value each iteration gets.

    ``host_uses`` are the places the loop variable reaches Python rather than a tensor index:
    passed to a call (``scheduler.step(noise, t, x)``), tested (``if t > 0``), used in
    arithmetic outside a subscript. Such a body traces differently with each value (a library
    may index its host tables with it, or branch on it), so ``scan``, which traces the body
    once, is no drop-in. A body whose loop variable is unused, or only indexes tensors
    (``x[:, t]``), is one scan can run. ``last_line`` is the body's last line, where a sync per
    iteration goes.
    """

    header: str  # the loop's header, ``for t in scheduler.timesteps:``
    variable: str | None  # the loop variable's name (None: a tuple or no plain name)
    host_uses: tuple[str, ...]  # e.g. "`t` passed to scheduler.step() (line 49)"
    last_line: int
    calls_variable: bool = False  # the body calls the loop variable: a loop over layers


def _host_use(node: ast.AST, parents: dict[ast.AST, ast.AST], variable: str) -> str | None:
    """How the loop variable at ``node`` reaches host code, or None for a tensor index."""
    parent = parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.Subscript) and node is not parent.value:
            return None  # indexes a tensor: x[t], x[:, t]
        if isinstance(parent, ast.Call):
            if node is parent.func:
                return None  # the loop calls it (a layer): calls_variable says so
            callee = ast.unparse(parent.func)
            return f"`{variable}` passed to {callee}() (line {parent.lineno})"
        if isinstance(parent, ast.If | ast.While | ast.IfExp | ast.Compare | ast.Assert):
            return f"`{variable}` tested (line {parent.lineno})"
        if isinstance(parent, ast.stmt):
            return f"`{variable}` used in Python (line {parent.lineno})"
        node, parent = parent, parents.get(parent)
    return None


def loop_body(sources: SourceFiles, file: str, loop_line: int) -> LoopBody | None:
    """The ``for`` loop at ``loop_line`` of ``file`` and its body's uses of the loop variable."""
    tree = sources.tree(file)
    if tree is None:
        return None
    loop = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.For) and n.lineno == loop_line), None
    )
    if loop is None:
        return None
    header = f"for {ast.unparse(loop.target)} in {ast.unparse(loop.iter)}:"
    variable = loop.target.id if isinstance(loop.target, ast.Name) else None
    uses: list[str] = []
    called = False
    if variable is not None:
        parents = {child: node for node in ast.walk(loop) for child in ast.iter_child_nodes(node)}
        for statement in loop.body:
            for node in ast.walk(statement):
                if isinstance(node, ast.Call) and ast.unparse(node.func) == variable:
                    called = True
                elif isinstance(node, ast.Name) and node.id == variable:
                    use = _host_use(node, parents, variable)
                    if use is not None and use not in uses:
                        uses.append(use)
    last = max((s.end_lineno or s.lineno) for s in loop.body)
    return LoopBody(header, variable, tuple(uses), last, called)


def call_source(sources: SourceFiles, file: str, line: int) -> str | None:
    """The whole call that starts on ``line`` (the outermost, spanning lines), as source text."""
    tree = sources.tree(file)
    if tree is None:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno == line]
    if not calls:
        return None
    outer = max(calls, key=lambda n: (n.end_lineno or n.lineno, -n.col_offset))
    return ast.unparse(outer)


def backward_in_loop(sources: SourceFiles, file: str, line: int) -> int | None:
    """The line of a ``backward()`` call in the body of the ``for``/``while`` loop at (or
    holding) ``line``: ``loss.backward()``, ``scaler.scale(loss).backward()``,
    ``accelerator.backward(loss)``. A loop that runs the backward pass once per iteration is a
    gradient-accumulation loop: scan cannot hold it (its traced function has no backward), so
    its fix is a sync per iteration or torch_xla's gradient-accumulation helper. None when the
    loop calls no backward or the source is not there."""
    tree = sources.tree(file)
    if tree is None:
        return None
    loop = _innermost(tree, line, (ast.For, ast.AsyncFor, ast.While))
    if loop is None:
        return None
    for node in ast.walk(loop):
        if isinstance(node, ast.Call) and _call_name(node) == "backward":
            return node.lineno
    return None


def caller_loop(sources: SourceFiles, file: str, line: int, depth: int = 2) -> int | None:
    """The loop that repeats ``line`` through a call: where ``line`` is in no loop of its own
    function (``probs = policy(state)`` inside ``select_action``), the header of the loop in
    the same file around a call of that function (``for t in range(steps):
    action = select_action(...)``), up to ``depth`` calls out. None when no such loop is there.
    """
    tree = sources.tree(file)
    if tree is None:
        return None
    function = _innermost(tree, line, (ast.FunctionDef, ast.AsyncFunctionDef))
    if function is None or depth <= 0:
        return None
    assert isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
    end = function.end_lineno or function.lineno
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _call_name(node) == function.name):
            continue
        if function.lineno <= node.lineno <= end:
            continue  # a recursive call repeats nothing from outside
        loop = enclosing_loop(sources, file, node.lineno)
        if loop is None:
            loop = caller_loop(sources, file, node.lineno, depth - 1)
        if loop is not None:
            return loop
    return None


# Calls that read a device tensor's value on the host.
_HOST_READS = frozenset({"item", "tolist", "cpu", "numpy"})


def host_read_in_loop(sources: SourceFiles, file: str, loop_line: int) -> int | None:
    """The line of a host read (``.item()``, ``.tolist()``, ``.cpu()``, ``.numpy()``) in the
    body of the loop whose header is at ``loop_line``, or in a function of the same file that
    the body calls: such a loop needs each iteration's value on the host (an action handed to
    an environment), so scan cannot run it. None when there is none or no source."""
    tree = sources.tree(file)
    if tree is None:
        return None
    loop = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, (ast.For, ast.AsyncFor, ast.While)) and n.lineno == loop_line
        ),
        None,
    )
    if loop is None:
        return None
    functions = {
        n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    bodies: list[ast.AST] = [loop]
    seen: set[str] = set()
    while bodies:
        body = bodies.pop()
        for node in ast.walk(body):
            if not isinstance(node, ast.Call):
                continue
            name = _call_name(node)
            if name in _HOST_READS and isinstance(node.func, ast.Attribute):
                return node.lineno
            if name in functions and name not in seen:
                seen.add(name)
                bodies.append(functions[name])
    return None


def pad_multiple(sources: SourceFiles, file: str, line: int) -> int | None:
    """The constant ``pad_to_multiple_of=N`` of the call at ``line`` (a collator, a tokenizer
    call), or None: padding that rounds each batch's longest up to a multiple of N."""
    tree = sources.tree(file)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno == line:
            for keyword in node.keywords:
                value = keyword.value
                if (
                    keyword.arg == "pad_to_multiple_of"
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, int)
                    and not isinstance(value.value, bool)
                    and value.value > 0
                ):
                    return value.value
    return None
