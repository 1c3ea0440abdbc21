"""The package's stages import one way: every import, lazy and ``TYPE_CHECKING`` ones included.

Stages, first to last (a module may import its own stage and earlier ones, never a later one):

    base (errors, findings, safeio, escape) < parse < rundir < capture < model < tables < inputs
    < analyzers < budgets < pipeline < report < fixes < mcp < cli < the facade (``xlaprof``,
    ``api``)

So nothing inside the package imports the facade: the CLI, the renderers and the fix benchmarks
all reach the analysis through ``xlaprof.pipeline``, as the Python API does.

No two modules import each other (directly or round a longer cycle), and no module imports
another module's private (``_name``) names, nor reads them off an imported module.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "xlaprof"
STAGES = (
    ("base", ("xlaprof.errors", "xlaprof.findings", "xlaprof.safeio", "xlaprof.escape")),
    ("parse", ("xlaprof.parse",)),
    ("rundir", ("xlaprof.rundir",)),
    ("capture", ("xlaprof.capture",)),
    ("model", ("xlaprof.model",)),
    ("tables", ("xlaprof.tables",)),
    ("inputs", ("xlaprof.inputs",)),
    ("analyzers", ("xlaprof.analyzers",)),
    ("budgets", ("xlaprof.budgets",)),
    ("pipeline", ("xlaprof.pipeline",)),
    ("report", ("xlaprof.report",)),
    ("fixes", ("xlaprof.fixes",)),
    # The MCP server presents the pipeline's results through the report's documents, as the
    # CLI does; the CLI's `xlaprof mcp` starts it, so it comes just before the CLI.
    ("mcp", ("xlaprof.mcp",)),
    ("cli", ("xlaprof.cli", "xlaprof.__main__")),
    ("facade", ("xlaprof", "xlaprof.api")),
)


def stage_of(module: str) -> int:
    """The index in ``STAGES`` of the stage that holds ``module`` (the longest prefix wins)."""
    best, length = None, -1
    for index, (_, prefixes) in enumerate(STAGES):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > length:
                best, length = index, len(prefix)
    assert best is not None, f"{module} belongs to no stage: add it to STAGES"
    return best


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # a module of the package
    line: int
    private: str | None = None  # a private name taken from ``target``


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every import of a package module in ``path``, wherever it stands in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []
    aliases: dict[str, str] = {}  # local name -> package module it is bound to
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "xlaprof":
                    found.append(Import(module, alias.name, node.lineno))
                    if alias.asname:
                        aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            if base.split(".")[0] != "xlaprof":
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in modules:  # ``from package import module``
                    found.append(Import(module, full, node.lineno))
                    aliases[alias.asname or alias.name] = full
                else:
                    private = alias.name if _private(alias.name) else None
                    found.append(Import(module, base, node.lineno, private))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and _private(node.attr)
        ):
            found.append(Import(module, aliases[node.value.id], node.lineno, node.attr))
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def all_imports() -> list[Import]:
    modules = module_names()
    return [i for name, path in modules.items() for i in imports_of(name, path, modules)]


def test_every_module_belongs_to_a_stage() -> None:
    # GIVEN every module of the package WHEN it is placed THEN some stage holds it
    for name in module_names():
        stage_of(name)


def test_no_import_reaches_a_later_stage() -> None:
    # GIVEN every import in the package WHEN importer and target are placed in their stages
    # THEN no import goes from an earlier stage to a later one
    wrong = [
        f"{i.importer}:{i.line} imports {i.target} "
        f"({STAGES[stage_of(i.importer)][0]} -> {STAGES[stage_of(i.target)][0]})"
        for i in all_imports()
        if stage_of(i.target) > stage_of(i.importer)
    ]
    assert not wrong, "\n".join(wrong)


def test_no_private_name_crosses_a_module() -> None:
    # GIVEN every import WHEN it names a private (_x) name of another module THEN none does
    wrong = [
        f"{i.importer}:{i.line} takes {i.private} from {i.target}"
        for i in all_imports()
        if i.private is not None and i.target != i.importer
    ]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle() -> None:
    # GIVEN the graph of module imports WHEN it is searched for cycles THEN there is none
    # (a package's __init__ re-exporting its submodules is an edge like any other)
    graph: dict[str, set[str]] = {}
    for i in all_imports():
        if i.target != i.importer:
            graph.setdefault(i.importer, set()).add(i.target)
    cycles = _cycles(graph)
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checks_see_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    # GIVEN a module whose only imports are inside a function and under TYPE_CHECKING
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from xlaprof.cli import main\n"
        "def f():\n"
        "    from xlaprof.report.console import _helper\n"
        "    import xlaprof.api as api\n"
        "    return api._secret\n"
    )
    # WHEN its imports are collected as if it were xlaprof.parse.probe
    found = imports_of("xlaprof.parse.probe", source, module_names())
    # THEN all three imports and both private names are seen
    assert {i.target for i in found} == {"xlaprof.cli", "xlaprof.report.console", "xlaprof.api"}
    assert {i.private for i in found} == {None, "_helper", "_secret"}
    assert all(stage_of(i.target) > stage_of("xlaprof.parse.probe") for i in found)


def test_no_test_takes_a_private_name_of_the_package() -> None:
    # GIVEN every import in tests/ WHEN it names a private (_x) name of the package THEN none
    # does: a test asserts what a user can call, see or read, not a helper's inside
    modules = module_names()
    wrong = [
        f"{path.relative_to(REPO)}:{i.line} takes {i.private} from {i.target}"
        for path in sorted((REPO / "tests").rglob("*.py"))
        for i in imports_of(f"tests.{path.stem}", path, modules)
        if i.private is not None
    ]
    assert not wrong, "\n".join(wrong)


# What the stages after the pipeline may not import: the live inputs (a trace, a run directory's
# reader, the input loaders). They read the finished result, which holds numbers, tables and
# findings; what they need of a path (MCP's listings) they ask of ``xlaprof.pipeline``.
CLOSED_CONSUMERS = (
    "xlaprof.report",
    "xlaprof.mcp",
    "xlaprof.api",
    "xlaprof.budgets",
    "xlaprof.fixes",
)
LIVE_INPUTS = ("xlaprof.model.trace", "xlaprof.rundir.reader", "xlaprof.inputs")


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_results_consumers_import_no_live_input() -> None:
    # GIVEN every import of the renderers, MCP, the facade, the budgets and the fix benchmarks
    # WHEN its target is a live input (a trace, a run's reader, a loader)
    wrong = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in all_imports()
        if _within(i.importer, CLOSED_CONSUMERS) and _within(i.target, LIVE_INPUTS)
    ]
    # THEN there is none: they read the finished result
    assert not wrong, "\n".join(wrong)


# What the result's consumers may take from ``tables`` (the stage that computes the result's
# tables, run by the pipeline): the renderers, the --json document's serialization helpers
# (records, strict numbers: no aggregate), which the pipeline shares; the fix benchmarks,
# the comparison of figures, because a benchmark measures its own sides (each figure the median
# over repeated runs of the pipeline's figures) and compares them as ``xlaprof diff`` does.
# MCP, the facade and the budgets take nothing: the steady step, the top ops and the
# comparison of two results are the pipeline's (``PartResult.steady``, ``top_ops_of``,
# ``figures_compared``), and a budget reads the figures the pipeline made.
TABLES_ALLOWED = {
    "xlaprof.report": ("xlaprof.tables.document",),
    "xlaprof.fixes": ("xlaprof.tables.compare",),
    "xlaprof.mcp": (),
    "xlaprof.api": (),
    "xlaprof.budgets": (),
}


def test_the_results_consumers_compute_nothing_from_tables() -> None:
    # GIVEN every import of the renderers, MCP, the facade, the budgets and the fix benchmarks
    # WHEN its target is a module of tables
    wrong = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in all_imports()
        for consumer, allowed in TABLES_ALLOWED.items()
        if _within(i.importer, (consumer,))
        and _within(i.target, ("xlaprof.tables",))
        and i.target not in allowed
    ]
    # THEN there is none but those allowed above: their numbers are the result's, made once
    assert not wrong, "\n".join(wrong)
    # AND the consumers are those the closed-result rule names (none left out)
    assert set(TABLES_ALLOWED) == set(CLOSED_CONSUMERS)


def test_the_renderers_read_no_environment_variable() -> None:
    # GIVEN every renderer module WHEN its source is searched for the environment
    readers = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in sorted((PACKAGE / "report").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if (isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv"))
    ]
    # THEN none reads one: settings reach them in RenderOptions (the CLI fills it)
    assert not readers, "\n".join(readers)


# Where the environment may be read: the edges, where a command, the facade or the MCP server
# starts and puts what the environment says into the request (``PodSettings.of``); the training
# process's side (``capture/``, which runs inside the user's job and reads its own switches);
# and the fix benchmarks' processes, which set the runtime's flags for themselves
# (``fixes/worker.py``) and hand the environment on to the processes they start
# (``fixes/bench.py``).
ENVIRONMENT_EDGES = ("xlaprof/cli", "xlaprof/api.py", "xlaprof/__init__.py", "xlaprof/capture")
ENVIRONMENT_PASSED_ON = ("xlaprof/fixes/worker.py", "xlaprof/fixes/bench.py")
# A switch of how, never of what: XLAPROF_PURE_DECODER runs the numpy decoder instead of the
# compiled core (the tests hold the two to identical frames), for a process as a whole.
ENVIRONMENT_IMPLEMENTATION = ("xlaprof/parse/xplane/wire.py",)


def _reads_environment(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb")) or (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(a.name in ("environ", "getenv", "environb") for a in node.names)
        ):
            lines.append(node.lineno)
    return lines


def test_nothing_below_the_edges_reads_the_environment() -> None:
    # GIVEN every module of the package but the edges and the processes it starts
    readers = [
        f"{relative}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not (relative := str(path.relative_to(REPO))).startswith(ENVIRONMENT_EDGES)
        and relative not in ENVIRONMENT_PASSED_ON
        and relative not in ENVIRONMENT_IMPLEMENTATION
        for line in _reads_environment(ast.parse(path.read_text()))
    ]
    # THEN none reads an environment variable: settings reach the pipeline in the request
    # (the pod's scheduler, lazy-loading threshold, client timeout and cache folder included)
    assert not readers, "\n".join(readers)


# The event-source contract (``xlaprof.model.trace.EventSource``): where a trace's events are,
# in memory or in a pod's caches. Its members answer for both kinds, so outside the model
# (which defines both) nothing asks which kind a trace has.
SOURCE_KINDS = ("CachedEvents", "HeldEvents")
SOURCE_ATTRIBUTES = ("source", "events_source")


def _asks_the_source_kind(tree: ast.AST) -> list[int]:
    """The lines of ``tree`` that test a trace's event source for its kind."""
    return [
        node.lineno for node in ast.walk(tree) if _isinstance_of_a_kind(node) or _none_test(node)
    ]


def _isinstance_of_a_kind(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "isinstance"
        and any(
            isinstance(n, ast.Name) and n.id in SOURCE_KINDS
            for arg in node.args[1:]
            for n in ast.walk(arg)
        )
    )


def _none_test(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Compare)
        and isinstance(node.left, ast.Attribute)
        and node.left.attr in SOURCE_ATTRIBUTES
        and isinstance(node.left.value, ast.Name)
        and node.left.value.id in ("trace", "view", "data")
        and all(isinstance(op, ast.Is | ast.IsNot) for op in node.ops)
    )


def test_nothing_outside_the_model_asks_which_kind_of_event_source_a_trace_has() -> None:
    # GIVEN every module of the package outside the model
    asking = [
        f"{path.relative_to(REPO)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not str(path.relative_to(REPO)).startswith("xlaprof/model/")
        for line in _asks_the_source_kind(ast.parse(path.read_text()))
    ]
    # THEN none tests a trace's source for its kind (isinstance, ``trace.source is None``):
    # what differs is a member of the contract
    assert not asking, "\n".join(asking)


def test_the_kind_check_sees_both_forms() -> None:
    # GIVEN a module that asks both ways WHEN it is searched THEN both lines are found
    tree = ast.parse(
        "def f(trace):\n"
        "    if trace.source is None:\n"
        "        return 1\n"
        "    return isinstance(trace.events_source, CachedEvents)\n"
    )
    assert sorted(_asks_the_source_kind(tree)) == [2, 4]
