"""Every regular expression of the readers runs in linear time on long adversarial lines.

A pattern with ambiguous adjacent quantifiers (``\\s+`` beside a class that also matches a
space, a lazy ``.+?`` before ``\\s+``) backtracks over the whole line at each position: one
1 MB line of a TORCH_TRACE log took minutes. The per-line byte cap does not bound that, so the
patterns themselves must be linear.

The patterns are collected, not listed: every ``re.Pattern`` a module of ``xlaprof/parse``,
``xlaprof/inputs`` or ``xlaprof/rundir`` holds, and every pattern literal written in a call
to ``re`` inside a function. A new reader's pattern is tested the day it is written.

For each pattern the lines tried are built from its own literal pieces (so the match gets as
far as it can) and fillers that its classes and quantifiers meet: ``piece + filler * n``,
``(piece + filler) * n`` and ``filler * n``. Each is run at two lengths eight times apart, with
the methods the code calls on that pattern (a ``fullmatch``-only pattern is not judged by
``search``). Linear work grows eight times; backtracking over the line grows 64 times. The
verdict is that ratio of CPU time (the best of several runs, so other work on the machine
does not count), with a floor under which a line is too fast to judge: it does not depend on
the machine's speed, only on the growth.
"""

from __future__ import annotations

import ast
import importlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO

PACKAGES = ("parse", "inputs", "rundir")
SHORT = 400
LONG = 8 * SHORT
# Linear: about 8; quadratic: about 64. A line under the floor at LONG is linear enough.
MAX_RATIO = 24.0
FLOOR_S = 0.002
# Linear work on SHORT characters takes microseconds; this much is backtracking.
SHORT_LIMIT_S = 0.02
FILLERS = [" ", "a", "0", ".", "-", ":", "(", ")", "#", '"', "{", "=", "/", "]", "a ", "0."]
_SEARCH_LIKE = {"search", "findall", "finditer", "sub", "subn", "split"}


@dataclass(frozen=True)
class Found:
    where: str
    pattern: re.Pattern[str]
    methods: frozenset[str]


def _modules() -> list[Path]:
    files: list[Path] = []
    for package in PACKAGES:
        files += sorted((REPO / "xlaprof" / package).rglob("*.py"))
    return files


def _module_name(path: Path) -> str:
    relative = path.relative_to(REPO).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _methods_by_name(tree: ast.AST) -> dict[str, set[str]]:
    """``{"_FRAME_RE": {"match"}}``: the methods the module calls on each name."""
    used: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            used.setdefault(node.value.id, set()).add(node.attr)
    return used


def collect() -> list[Found]:
    """Every pattern of the readers, with the methods it is used through."""
    found: list[Found] = []
    for path in _modules():
        tree = ast.parse(path.read_text())
        module = importlib.import_module(_module_name(path))
        used = _methods_by_name(tree)
        held = {v.pattern for v in vars(module).values() if isinstance(v, re.Pattern)}
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                methods = used.get(name, set()) & (_SEARCH_LIKE | {"match", "fullmatch"})
                # A pattern handed to other code (not called here) is judged the hardest way.
                found.append(
                    Found(f"{module.__name__}.{name}", value, frozenset(methods or {"search"}))
                )
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                continue
            if node.func.attr == "compile" and node.args[0].value in held:
                continue  # a module's pattern, judged above by the methods called on it
            method = node.func.attr if node.func.attr != "compile" else "search"
            flags = 0
            for keyword in node.keywords:
                if keyword.arg == "flags":
                    flags = eval(
                        compile(ast.Expression(keyword.value), "<flags>", "eval"), vars(re)
                    )
            found.append(
                Found(
                    f"{module.__name__}:{node.lineno}",
                    re.compile(node.args[0].value, flags),
                    frozenset({method}),
                )
            )
    return found


def _literals(pattern: str) -> list[str]:
    """The runs of literal characters in a pattern, as its parser sees them."""
    from re import _constants, _parser  # type: ignore[attr-defined]

    pieces: list[str] = []

    def walk(items: object) -> None:
        current = ""
        for op, arg in items:  # type: ignore[attr-defined]
            if op is _constants.LITERAL:
                current += chr(arg)
                continue
            if current:
                pieces.append(current)
                current = ""
            if op in (_constants.MAX_REPEAT, _constants.MIN_REPEAT, _constants.POSSESSIVE_REPEAT):
                walk(arg[2])
            elif op is _constants.SUBPATTERN:
                walk(arg[-1])
            elif op is _constants.BRANCH:
                for branch in arg[1]:
                    walk(branch)
            elif op is _constants.IN:
                for kind, value in arg:
                    if kind is _constants.LITERAL:
                        pieces.append(chr(value))
        if current:
            pieces.append(current)

    walk(_parser.parse(pattern))
    # Prefixes of the pattern's start too: "[TAG " gets a lazy body going.
    starts = {"".join(pieces[:k]) for k in range(1, min(len(pieces), 4) + 1)}
    return sorted(set(pieces[:8]) | starts)


def _lines(pattern: str) -> list[tuple[str, Callable[[int], str]]]:
    families: list[tuple[str, Callable[[int], str]]] = []
    for filler in FILLERS:
        families.append((f"{filler!r}*n", lambda n, f=filler: f * (n // len(f))))
        for piece in _literals(pattern):
            families.append(
                (f"{piece!r}+{filler!r}*n", lambda n, p=piece, f=filler: p + f * (n // len(f)))
            )
            unit = piece + filler
            families.append(
                (f"({piece!r}+{filler!r})*n", lambda n, u=unit: u * max(1, n // len(u)))
            )
    families.append(("pieces*n", lambda n: "".join(_literals(pattern)) * 1 + " " * n))
    return families


def _cpu(call: Callable[[str], object], text: str, repeats: int) -> float:
    """The least CPU time of this thread over ``repeats`` calls: the thread's own, so that
    another thread of the test process (a runtime's pool, a worker left by an earlier test)
    busy meanwhile does not count as the pattern's time (the process's time once read 590 ms
    for a one-character class over 3,200 characters)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        call(text)
        best = min(best, time.thread_time() - start)
    return best


def _calls(found: Found) -> list[Callable[[str], object]]:
    calls: list[Callable[[str], object]] = []
    if found.methods & _SEARCH_LIKE:
        calls.append(lambda s: list(found.pattern.finditer(s)))
    if "match" in found.methods:
        calls.append(found.pattern.match)
    if "fullmatch" in found.methods:
        calls.append(found.pattern.fullmatch)
    return calls


def superlinear(found: Found) -> list[str]:
    """The lines on which ``found`` grows faster than linearly, with their figures."""
    slow: list[str] = []
    for call in _calls(found):
        for label, make in _lines(found.pattern.pattern):
            # A short line this slow is worse than quadratic: the long one is not tried.
            short_s = _cpu(call, make(SHORT), 1)
            if short_s > SHORT_LIMIT_S:
                slow.append(f"{label}: {short_s * 1e3:.0f} ms for {SHORT} characters")
                break
            long_s = _cpu(call, make(LONG), 1)
            if long_s < FLOOR_S:
                continue
            if long_s > 0.5 and long_s / max(short_s, 1e-6) > MAX_RATIO:
                # A second try before the verdict (one more long run, not three: each is slow)
                long_s = min(long_s, _cpu(call, make(LONG), 1))
                short_s = _cpu(call, make(SHORT), 3)
                if long_s / max(short_s, 1e-6) > MAX_RATIO:
                    slow.append(f"{label}: {short_s * 1e3:.2f} ms -> {long_s * 1e3:.0f} ms")
                    break
            # Confirm with more runs: a pause of this process on a busy machine is not growth.
            long_s = _cpu(call, make(LONG), 3)
            short_s = _cpu(call, make(SHORT), 5)
            ratio = long_s / max(short_s, 1e-6)
            if long_s >= FLOOR_S and ratio > MAX_RATIO:
                slow.append(
                    f"{label}: {short_s * 1e3:.2f} ms -> {long_s * 1e3:.2f} ms (x{ratio:.0f})"
                )
                break
    return slow


FOUND = collect()


def test_the_collection_finds_the_readers_patterns() -> None:
    # GIVEN the readers' modules WHEN their patterns are collected THEN those of each format
    # are there (a collector that finds nothing passes every check below).
    wheres = {f.where.rsplit(".", 1)[0].rsplit(":", 1)[0] for f in FOUND}
    for module in (
        "xlaprof.parse.torch_trace",
        "xlaprof.parse.hlo",
        "xlaprof.parse.debug_log",
        "xlaprof.parse.frames",
        "xlaprof.parse.metrics_report",
        "xlaprof.parse.dynamo_log",
    ):
        assert module in wheres, module
    assert len(FOUND) > 40


def test_the_judge_sees_a_quadratic_pattern() -> None:
    # GIVEN the shape the attacker used (a lazy body before \s+ and a literal) WHEN judged
    # THEN it is found superlinear: the check can fail.
    bad = Found(
        "example", re.compile(r"\[TAG\s+(.*?)\s+From Thread\s+\d+\]"), frozenset({"search"})
    )
    assert superlinear(bad)


@pytest.mark.parametrize("found", FOUND, ids=lambda f: f.where)
def test_pattern_is_linear_on_long_lines(found: Found) -> None:
    # GIVEN one of the readers' patterns WHEN run over long lines built to make it backtrack
    # THEN its cost grows with the line's length, not with its square.
    assert not superlinear(found), f"{found.where} /{found.pattern.pattern}/ is superlinear"
