"""The budgets of ``xlaprof check``: what may be limited, read from flags or a TOML table."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.errors import BudgetError
from xlaprof.findings import Kind
from xlaprof.parse.units import finite

if TYPE_CHECKING:
    pass


# The table read from pyproject.toml (or the top level / this table of a --budget file).
TABLE = ("tool", "xlaprof", "check")
# The Budgets fields that are limits (the rest say how to check them), in the order checked.
LIMITS = (
    "max_recompilations",
    "max_host_syncs_per_step",
    "max_fallback_ops",
    "max_graphs",
    "max_compile_seconds",
    "max_step_time_ratio",
    "forbid",
)


@dataclass(frozen=True)
class Budgets:
    """The limits to check. ``None`` (or an empty tuple) means: not checked.

    ``max_recompilations``: compilations in steps at or after ``warmup_steps``.
    ``max_host_syncs_per_step``: mean device→host reads per step after warm-up (``.item()``,
    ``.cpu()``, printing a tensor, and the copy each CPU fallback makes).
    ``max_fallback_ops``: distinct ``aten::`` ops that ran on the CPU, not counting
    ``allow_fallback`` (given alone, ``allow_fallback`` means no other op may fall back).
    ``max_graphs``: distinct graphs compiled in the whole run.
    ``forbid``: finding kinds that must not appear (``tracing_bound``, ``unrolled_loop``...).
    ``max_step_time_ratio``: median steady step of the run / that of ``baseline``.
    ``max_compile_seconds``: total compile time of the run.
    """

    max_recompilations: int | None = None
    max_host_syncs_per_step: float | None = None
    max_fallback_ops: int | None = None
    allow_fallback: tuple[str, ...] = ()
    max_graphs: int | None = None
    forbid: tuple[str, ...] = ()
    baseline: Path | None = None
    max_step_time_ratio: float | None = None
    max_compile_seconds: float | None = None
    warmup_steps: int = 2
    allow_unmeasured: bool = False

    def __post_init__(self) -> None:
        for name in ("max_recompilations", "max_fallback_ops", "max_graphs"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise BudgetError(f"{_option(name)}: expected a whole number ≥ 0, got {value!r}")
        for name in ("max_host_syncs_per_step", "max_compile_seconds", "max_step_time_ratio"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not finite(value)
                or value < 0
            ):
                raise BudgetError(f"{_option(name)}: expected a number ≥ 0, got {value!r}")
        if isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int):
            raise BudgetError(f"warmup-steps: expected a whole number, got {self.warmup_steps!r}")
        if self.warmup_steps < 0:
            raise BudgetError(f"warmup-steps: expected a whole number ≥ 0, got {self.warmup_steps}")
        object.__setattr__(self, "allow_fallback", _fallback_names(self.allow_fallback))
        object.__setattr__(self, "forbid", _kinds(self.forbid))
        if self.baseline is not None:
            object.__setattr__(self, "baseline", Path(self.baseline))

    def validate(self) -> None:
        """Raise ``BudgetError`` unless these budgets can be checked as they stand.

        Called on the final budgets (file and flags merged), since a file may hold the ratio
        and the command line the baseline.
        """
        if self.max_step_time_ratio is not None and self.baseline is None:
            raise BudgetError("max-step-time-ratio needs a baseline run (--baseline RUN)")
        if self.baseline is not None and self.max_step_time_ratio is None:
            raise BudgetError("a baseline run needs max-step-time-ratio (--max-step-time-ratio R)")
        if self.empty:
            raise BudgetError(
                "no budget to check: give one (--max-recompilations N, ...) or a "
                "[tool.xlaprof.check] table in pyproject.toml (see docs/ci.md)"
            )

    @property
    def empty(self) -> bool:
        """True when nothing would be checked."""
        unset = all(getattr(self, name) in (None, ()) for name in LIMITS)
        return unset and not self.allow_fallback

    @classmethod
    def options(cls) -> list[str]:
        """Every budget setting as a command-line option or TOML key (``max-recompilations``)."""
        return [_option(f.name) for f in fields(cls)]

    def updated(self, **values: Any) -> Budgets:
        """A copy with the given (non-None, non-empty) values replacing these: flags over a file."""
        given = {k: v for k, v in values.items() if v is not None and v != ()}
        return replace(self, **given)

    @classmethod
    def from_table(cls, table: Mapping[str, Any], source: str, base_dir: Path) -> Budgets:
        """Budgets from a ``[tool.xlaprof.check]`` table (keys as the CLI options, without --).

        ``baseline`` is taken relative to ``base_dir`` (the file's folder).
        """
        known = {_option(f.name): f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in table.items():
            name = known.get(key) or known.get(key.replace("_", "-"))
            if name is None:
                raise BudgetError(
                    f"{source}: unknown budget {key!r} (known: {', '.join(sorted(known))})"
                )
            if name in ("allow_fallback", "forbid"):
                if isinstance(value, str):
                    value = (value,)
                if not isinstance(value, list | tuple) or not all(
                    isinstance(v, str) for v in value
                ):
                    raise BudgetError(f"{source}: {key} must be a list of strings")
                value = tuple(value)
            elif name == "baseline":
                if not isinstance(value, str):
                    raise BudgetError(f"{source}: baseline must be a path (a string)")
                value = base_dir / value
            elif name == "allow_unmeasured" and not isinstance(value, bool):
                raise BudgetError(f"{source}: allow-unmeasured must be true or false")
            values[name] = value
        try:
            return cls(**values)
        except BudgetError as error:
            raise BudgetError(f"{source}: {error}") from None

    @classmethod
    def from_file(cls, path: Path, follow: bool = True) -> Budgets:
        """Read budgets from a TOML file: its ``[tool.xlaprof.check]`` table if it has one
        (a pyproject.toml), else its top level (a budget file of its own).

        The file may come with a repository someone sent (``xlaprof check`` reads the
        checkout's pyproject.toml): it is read only if it is a regular file (a FIFO or a device
        is refused before a byte is read), at most ``MAX_BUDGET_FILE_BYTES``, and TOML nested
        too deep for the parser is a ``BudgetError`` like any other invalid file.
        ``follow=False`` refuses a link in its last component (the MCP server's, whose paths
        are resolved first).
        """
        text = _read_budget_file(Path(path), follow)
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise BudgetError(f"{path}: not valid TOML ({error})") from None
        except RecursionError:
            raise BudgetError(f"{path}: not valid TOML (nested too deep to read)") from None
        table = _table(document)
        if table is None:
            table = {} if Path(path).name == "pyproject.toml" else document
        return cls.from_table(table, str(path), Path(path).resolve().parent)


# A budget file, or a project's pyproject.toml: a large one is a few tens of KB.
MAX_BUDGET_FILE_BYTES = 4 * 1024**2


def _read_budget_file(path: Path, follow: bool) -> str:
    """The text of budget file ``path``: a regular file, capped, UTF-8 (``BudgetError``)."""
    from xlaprof.errors import InputNotFound, InputUnreadable
    from xlaprof.safeio import TooLarge, UnsafeFile, read_capped

    try:
        data = read_capped(path, MAX_BUDGET_FILE_BYTES, follow)
    except FileNotFoundError:
        raise InputNotFound(f"{path}: no such budget file") from None
    except TooLarge as error:
        size = f" ({error.size} bytes)" if error.size is not None else ""
        raise BudgetError(
            f"{path}: larger than {MAX_BUDGET_FILE_BYTES} bytes{size}; not a budget file"
        ) from None
    except UnsafeFile as error:
        raise BudgetError(f"{error}; budgets are read from regular files only") from None
    except OSError as error:
        raise InputUnreadable(f"{path}: cannot be read ({error.strerror})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BudgetError(f"{path}: not valid TOML (not UTF-8: {error.reason})") from None


def find_pyproject(start: Path) -> Path | None:
    """The project's pyproject.toml: the nearest one at or above ``start`` (as ruff and pytest
    look for theirs). ``Budgets.from_file`` reads its ``[tool.xlaprof.check]`` table, if any."""
    for folder in [start.resolve(), *start.resolve().parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def _table(document: Mapping[str, Any]) -> Mapping[str, Any] | None:
    node: Any = document
    for key in TABLE:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node if isinstance(node, Mapping) else None


def _option(attribute: str) -> str:
    return attribute.replace("_", "-")


def _fallback_names(names: Iterable[str]) -> tuple[str, ...]:
    """``median`` and ``aten::median`` name the same op; counters use the ``aten::`` form."""
    return tuple(dict.fromkeys(n if n.startswith("aten::") else f"aten::{n}" for n in names))


def _kinds(names: Iterable[str]) -> tuple[str, ...]:
    valid = {k.value for k in Kind}
    kinds = tuple(dict.fromkeys(names))
    for kind in kinds:
        if kind not in valid:
            raise BudgetError(
                f"forbid: unknown finding kind {kind!r} (known: {', '.join(sorted(valid))})"
            )
    return kinds
