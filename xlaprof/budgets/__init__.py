"""Budgets for a CI gate: what one run may cost, and the verdict on each budget.

A budget is a limit on one measured figure: compilations after warm-up, device→host reads per
step, CPU-fallback ops, distinct graphs, compile seconds, the median steady step against a
baseline run, or a finding kind that must not appear. ``evaluate`` is pure: budgets and analysis
results in, a ``CheckResult`` out. Loading runs is ``xlaprof.check`` / ``xlaprof check``'s job;
JSON, JUnit XML and GitHub annotations are renderers (``report/ci.py``).

A figure that was not measured (a log with no per-step rows, a run with no steady step) is never
taken as zero: its budget is *not measured*, which fails unless ``allow_unmeasured`` is set
(then it is reported as skipped). A gate that passes because it saw nothing is no gate.

Longer than the ~350 lines a module here aims for: each budget is read from flags or TOML,
measured and judged in a few lines, and all of them stay in one file so that one table
(``Budgets``) and one ``evaluate`` define what ``xlaprof check`` gates.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.errors import BudgetError
from xlaprof.findings import Finding, Kind
from xlaprof.model.input import COMPILE_METRICS, HOST_SYNC_OP, AnalysisInput
from xlaprof.parse.units import format_seconds
from xlaprof.tables.compare import run_summary

if TYPE_CHECKING:
    from xlaprof.model.result import PartResult

# The table read from pyproject.toml (or the top level / this table of a --budget file).
TABLE = ("tool", "xlaprof", "check")
_MAX_LISTED_STEPS = 12


class Status(StrEnum):
    """A budget's verdict. ``unmeasured`` fails; ``skipped`` is unmeasured and allowed."""

    PASS = "pass"
    FAIL = "fail"
    UNMEASURED = "unmeasured"
    SKIPPED = "skipped"

    @property
    def ok(self) -> bool:
        return self in (Status.PASS, Status.SKIPPED)


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
                or not math.isfinite(value)
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
        unset = all(getattr(self, spec.attribute) in (None, ()) for spec in BUDGETS)
        return unset and not self.allow_fallback

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
    def from_file(cls, path: Path) -> Budgets:
        """Read budgets from a TOML file: its ``[tool.xlaprof.check]`` table if it has one
        (a pyproject.toml), else its top level (a budget file of its own)."""
        try:
            with Path(path).open("rb") as handle:
                document = tomllib.load(handle)
        except FileNotFoundError:
            from xlaprof.errors import InputNotFound

            raise InputNotFound(f"{path}: no such budget file") from None
        except OSError as error:
            from xlaprof.errors import InputUnreadable

            raise InputUnreadable(f"{path}: cannot be read ({error.strerror})") from None
        except tomllib.TOMLDecodeError as error:
            raise BudgetError(f"{path}: not valid TOML ({error})") from None
        table = _table(document)
        if table is None:
            table = {} if Path(path).name == "pyproject.toml" else document
        return cls.from_table(table, str(path), Path(path).resolve().parent)


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


# -- verdicts ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """One budget checked on one run: the value, the limit, the verdict and why."""

    budget: str  # the option name, e.g. "max-recompilations" or "forbid tracing_bound"
    status: Status
    value: float | None
    limit: float
    unit: str  # "" (a count), "s" (seconds), "x" (a ratio)
    measured: str  # what the value is, in words, with the numbers behind it
    findings: list[Finding] = field(default_factory=list)  # those that explain a failure
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status.ok

    def value_text(self) -> str:
        return _format(self.value, self.unit)

    def limit_text(self) -> str:
        return _format(self.limit, self.unit)

    def line(self) -> str:
        """One summary line: verdict, budget, value against limit, what was measured."""
        if self.value is None:
            verdict = f"not measured (limit {self.limit_text()})"
        else:
            sign = "≤" if self.status is Status.PASS else ">"
            verdict = f"{self.value_text()} {sign} {self.limit_text()}"
        label = {"pass": "pass", "fail": "FAIL", "unmeasured": "FAIL", "skipped": "skip"}
        return f"{label[self.status.value]:<4}  {self.budget:<24} {verdict:<18}  {self.measured}"

    def explanation(self) -> str | None:
        """The first finding that explains a failure, with its user line, or None."""
        if self.ok or not self.findings:
            return None
        finding = self.findings[0]
        where = f" at {finding.location}" if finding.location is not None else ""
        return f"{finding.kind.value}: {finding.title}{where}"


@dataclass
class RunCheck:
    """Every budget checked on one process's run."""

    name: str
    path: str
    outcomes: list[Outcome]
    steps: int | None = None
    status: str | None = None  # how the run ended (run directories)

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)


@dataclass
class CheckResult:
    """The verdict of ``xlaprof check``: ``ok`` when every budget of every run is met.

    ``str(result)`` is the report a person reads (``assert result.ok, result`` in pytest).
    """

    runs: list[RunCheck]

    @property
    def ok(self) -> bool:
        return all(run.ok for run in self.runs)

    def __bool__(self) -> bool:
        return self.ok

    @property
    def outcomes(self) -> list[Outcome]:
        return [o for run in self.runs for o in run.outcomes]

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]

    def summary(self) -> str:
        outcomes = self.outcomes
        over = sum(o.status is Status.FAIL for o in outcomes)
        unmeasured = sum(o.status is Status.UNMEASURED for o in outcomes)
        skipped = sum(o.status is Status.SKIPPED for o in outcomes)
        if self.ok:
            text = (
                f"xlaprof check: passed: {len(outcomes) - skipped} of {len(outcomes)} budgets met"
            )
            return text + (f", {skipped} not measured (allowed)" if skipped else "")
        parts = []
        if over:
            parts.append(f"{over} over budget")
        if unmeasured:
            parts.append(f"{unmeasured} not measured")
        return f"xlaprof check: FAILED: {' and '.join(parts)} (of {len(outcomes)} budgets)"

    def __str__(self) -> str:
        lines = []
        for run in self.runs:
            about = []
            if run.steps is not None:
                about.append(f"{run.steps} steps")
            if run.status is not None:
                about.append(f"ended {run.status}")
            lines.append(f"{run.path}" + (f" ({', '.join(about)})" if about else ""))
            for outcome in run.outcomes:
                lines.append("  " + outcome.line())
                explanation = outcome.explanation()
                if explanation is not None:
                    lines.append(f"        why: {explanation}")
        lines.append(self.summary())
        return "\n".join(lines)


@dataclass(frozen=True)
class _Context:
    result: PartResult
    baseline: PartResult | None
    budgets: Budgets

    @property
    def data(self) -> AnalysisInput:
        return self.result.part.data

    def findings(self, *kinds: Kind) -> list[Finding]:
        return [f for f in self.result.findings if f.kind in kinds]


Measure = Callable[[_Context, Any], list[Outcome]]


@dataclass(frozen=True)
class BudgetSpec:
    attribute: str  # the Budgets field holding the limit
    measure: Measure


def evaluate(
    budgets: Budgets, results: list[PartResult], baseline: list[PartResult] | None = None
) -> CheckResult:
    """Check every budget on every analyzed part (one per process run).

    With several baseline parts, part *i* is compared with baseline part *i* when the counts
    match (ranks of the same job), else with the first. Raises ``BudgetError`` for budgets that
    cannot be checked (none at all: a check of nothing would pass whatever the run did).
    """
    budgets.validate()
    runs = []
    for index, result in enumerate(results):
        base = None
        if baseline:
            base = baseline[index] if len(baseline) == len(results) else baseline[0]
        context = _Context(result, base, budgets)
        outcomes: list[Outcome] = []
        for spec in BUDGETS:
            limit = getattr(budgets, spec.attribute)
            if spec.attribute == "max_fallback_ops" and limit is None and budgets.allow_fallback:
                limit = 0
            if limit is None or limit == ():
                continue
            outcomes.extend(spec.measure(context, limit))
        if budgets.allow_unmeasured:
            for outcome in outcomes:
                if outcome.status is Status.UNMEASURED:
                    outcome.status = Status.SKIPPED
        part = result.part
        run = part.run
        runs.append(
            RunCheck(
                name=part.name,
                path=str(run.path) if run is not None else ", ".join(s.path for s in part.sources),
                outcomes=outcomes,
                steps=part.data.step_count(),
                status=None if run is None else run.info.status,
            )
        )
    return CheckResult(runs)


def _verdict(
    budget: str,
    value: float | None,
    limit: float,
    unit: str,
    measured: str,
    findings: list[Finding] | None = None,
    evidence: dict[str, Any] | None = None,
) -> Outcome:
    status = Status.UNMEASURED
    if value is not None:
        status = Status.PASS if value <= limit else Status.FAIL
    return Outcome(
        budget=budget,
        status=status,
        value=value,
        limit=limit,
        unit=unit,
        measured=measured,
        findings=list(findings or []) if status is not Status.PASS else [],
        evidence=evidence or {},
    )


_NEEDS_STEPS = "needs per-step rows: profile the script with `xlaprof run` or xlaprof.profile()"


def _after_warmup(data: AnalysisInput) -> list[Any]:
    return [s for s in data.steps if s.step >= data.warmup_steps]


def _no_steady_steps(data: AnalysisInput, later: list[Any]) -> str | None:
    """Why a per-step budget cannot be measured (no step rows, none after warm-up), or None."""
    if not data.steps:
        return _NEEDS_STEPS
    if not later:
        return f"no step after warm-up (steps ≥ {data.warmup_steps}) was recorded"
    return None


def _steps_text(steps: list[int]) -> str:
    shown = ", ".join(str(s) for s in steps[:_MAX_LISTED_STEPS])
    return shown + (", …" if len(steps) > _MAX_LISTED_STEPS else "")


def _recompilations(ctx: _Context, limit: int) -> list[Outcome]:
    data = ctx.data
    budget = "max-recompilations"
    later = _after_warmup(data)
    unmeasured = _no_steady_steps(data, later)
    if unmeasured:
        return [_verdict(budget, None, limit, "", unmeasured)]
    compiling = [s for s in later if s.compiles]
    value = sum(s.compiles for s in compiling)
    measured = f"compilations after warm-up (steps ≥ {data.warmup_steps}, {len(later)} steps)"
    if compiling:
        measured += f", at steps {_steps_text([s.step for s in compiling])}"
    evidence = {
        "warmup_steps": data.warmup_steps,
        "steps_after_warmup": len(later),
        "compile_steps": [s.step for s in compiling],
    }
    return [
        _verdict(budget, value, limit, "", measured, ctx.findings(Kind.RECOMPILATION), evidence)
    ]


def _host_syncs(ctx: _Context, limit: float) -> list[Outcome]:
    data = ctx.data
    budget = "max-host-syncs-per-step"
    later = _after_warmup(data)
    unmeasured = _no_steady_steps(data, later)
    if unmeasured:
        return [_verdict(budget, None, limit, "", unmeasured)]
    reads = [s.transfers_from_device for s in later]
    scalar = sum(s.aten.get(HOST_SYNC_OP, 0) for s in later)
    fallback = sum(v for s in later for k, v in s.aten.items() if k != HOST_SYNC_OP)
    value = sum(reads) / len(later)
    measured = (
        f"device→host reads per step after warm-up (mean of {len(later)} steps, max {max(reads)};"
        f" {scalar} by .item(), {fallback} CPU-fallback calls in all)"
    )
    findings = ctx.findings(Kind.HOST_SYNC)
    if fallback:
        findings += [
            f for f in ctx.findings(Kind.ATEN_FALLBACK) if f.evidence.get("forces_host_sync")
        ]
    evidence = {
        "steps_after_warmup": len(later),
        "reads": sum(reads),
        "max_per_step": max(reads),
        "local_scalar_dense": scalar,
        "fallback_calls": fallback,
    }
    return [_verdict(budget, _round(value), limit, "", measured, findings, evidence)]


def _fallback_ops(ctx: _Context, limit: int) -> list[Outcome]:
    data = ctx.data
    budget = "max-fallback-ops"
    allowed = ctx.budgets.allow_fallback
    if not data.reports and not data.steps:
        text = "no metrics report or per-step rows (the aten:: counters) to read"
        return [_verdict(budget, None, limit, "", text)]
    calls = {op: n for op, n in data.aten_fallbacks().items() if n}
    counted = {op: n for op, n in calls.items() if op not in allowed}
    measured = "distinct aten:: ops run on the CPU"
    if allowed:
        measured += f", not counting {', '.join(allowed)}"
    if calls:
        measured += ": " + ", ".join(f"{op} ×{n}" for op, n in calls.items())
    findings = [f for f in ctx.findings(Kind.ATEN_FALLBACK) if f.evidence.get("op") in counted]
    evidence = {"ops": calls, "allowed": list(allowed), "counted": sorted(counted)}
    return [_verdict(budget, len(counted), limit, "", measured, findings, evidence)]


def _graphs(ctx: _Context, limit: int) -> list[Outcome]:
    data = ctx.data
    budget = "max-graphs"
    compilations = data.debug.compilations()
    hashes = [e.graph_hash for e in compilations]
    compiles = data.compiles()
    if compilations and all(hashes):
        value: int | None = len(set(hashes))
        measured = f"distinct graphs compiled (by graph hash; {len(compilations)} compilations)"
    else:
        value = compiles
        measured = "graphs compiled (compilations: no graph hashes recorded)"
    if value is None:
        measured = "no compilation count in the input"
    evidence = {"compiles": compiles, "distinct_graph_hashes": len(set(hashes)) or None}
    findings = ctx.findings(Kind.RECOMPILATION, Kind.UNROLLED_LOOP)
    return [_verdict(budget, value, limit, "", measured, findings, evidence)]


def _compile_seconds(ctx: _Context, limit: float) -> list[Outcome]:
    data = ctx.data
    budget = "max-compile-seconds"
    value: float | None = None
    if data.reports:
        # torch_xla omits a metric that never had a sample: then no compilation happened.
        value = data.metric_total(*COMPILE_METRICS) or 0.0
        measured = f"compile time in the whole run ({data.compiles() or 0} compilations)"
    elif data.steps:
        value = sum(s.compile_s for s in data.steps)
        measured = f"compile time in the recorded steps ({sum(s.compiles for s in data.steps)} "
        measured += "compilations)"
    else:
        measured = "no metrics report or per-step rows in the input"
    findings = ctx.findings(Kind.SLOW_COMPILE, Kind.RECOMPILATION, Kind.UNROLLED_LOOP)
    return [_verdict(budget, _round(value), limit, "s", measured, findings)]


def _step_time_ratio(ctx: _Context, limit: float) -> list[Outcome]:
    budget = "max-step-time-ratio"
    if ctx.baseline is None:
        return [_verdict(budget, None, limit, "x", "no baseline run to compare with")]
    mine, base = run_summary(ctx.data), run_summary(ctx.baseline.part.data)
    evidence = {
        "median_s": mine["step_median_s"],
        "spread_s": mine["step_spread_s"],
        "steady_steps": mine["steady_steps"],
        "baseline_median_s": base["step_median_s"],
        "baseline_spread_s": base["step_spread_s"],
        "baseline_steady_steps": base["steady_steps"],
        "baseline": str(ctx.baseline.part.run.path if ctx.baseline.part.run else ""),
    }
    measured = (
        f"median steady step {_steady_text(mine)} vs baseline {_steady_text(base)}"
        " (steady: after warm-up, no compilation; IQR = spread)"
    )
    if not mine["step_median_s"] or not base["step_median_s"]:
        which = "this run" if not mine["step_median_s"] else "the baseline"
        measured = f"no steady step in {which}: {measured}"
        return [_verdict(budget, None, limit, "x", measured, evidence=evidence)]
    ratio = mine["step_median_s"] / base["step_median_s"]
    before = {(f.kind, f.location) for f in ctx.baseline.findings}
    new = [f for f in ctx.result.findings if (f.kind, f.location) not in before]
    return [_verdict(budget, _round(ratio), limit, "x", measured, new, evidence)]


def _steady_text(summary: Mapping[str, Any]) -> str:
    spread = summary["step_spread_s"]
    return (
        f"{format_seconds(summary['step_median_s'])} (IQR "
        f"{format_seconds(spread) if spread is not None else '—'}, "
        f"{summary['steady_steps']} steps)"
    )


def _forbid(ctx: _Context, kinds: tuple[str, ...]) -> list[Outcome]:
    outcomes = []
    for name in kinds:
        kind = Kind(name)
        found = ctx.findings(kind)
        missing = _unmeasurable(kind, ctx.data)
        budget = f"forbid {name}"
        if missing is not None and not found:
            outcomes.append(_verdict(budget, None, 0, "", missing))
            continue
        measured = f"{name} findings" + (
            ": " + "; ".join(f.title for f in found[:3]) if found else ""
        )
        outcomes.append(_verdict(budget, len(found), 0, "", measured, found))
    return outcomes


def _unmeasurable(kind: Kind, data: AnalysisInput) -> str | None:
    """Why the analyzer of ``kind`` could not have looked at this input, or None if it could."""
    steady = [s for s in data.steps if s.step >= data.warmup_steps and s.compiles == 0]
    if kind in (Kind.RECOMPILATION, Kind.SLOW_COMPILE):
        ok = data.compiles() is not None or bool(data.debug.compilations())
        return None if ok else "no compilation data in the input"
    if kind in (Kind.HOST_SYNC, Kind.ATEN_FALLBACK):
        ok = bool(data.reports or data.steps or data.debug.events or data.debug.fallbacks)
        return None if ok else "no metrics, per-step rows or debug events in the input"
    if kind is Kind.TRACING_BOUND:
        from xlaprof.analyzers.tracing_bound import MIN_STEADY_STEPS

        if len(steady) < MIN_STEADY_STEPS:
            return (
                f"needs {MIN_STEADY_STEPS} steady steps (after warm-up, without compiling); "
                f"the run has {len(steady)}"
            )
        return None
    if kind is Kind.UNROLLED_LOOP:
        if not any(g.hlo is not None for g in data.graphs):
            return "needs the compiled graphs (a run made with `xlaprof run --graphs`)"
        return None
    if kind is Kind.MEMORY_PRESSURE:
        ok = data.device_memory is not None or any(
            e.memory is not None for e in data.debug.compilations()
        )
        return None if ok else "no post-compilation memory analysis or device memory figures"
    return None if (data.reports or data.steps or data.debug.events) else "the input is empty"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _format(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "s":
        return format_seconds(value)
    if unit == "x":
        return f"{value:.2f}x"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.2f}"


BUDGETS: tuple[BudgetSpec, ...] = (
    BudgetSpec("max_recompilations", _recompilations),
    BudgetSpec("max_host_syncs_per_step", _host_syncs),
    BudgetSpec("max_fallback_ops", _fallback_ops),
    BudgetSpec("max_graphs", _graphs),
    BudgetSpec("max_compile_seconds", _compile_seconds),
    BudgetSpec("max_step_time_ratio", _step_time_ratio),
    BudgetSpec("forbid", _forbid),
)
