"""Analysis entry points shared by the CLI, Python and notebooks.

``analyze_parts`` runs the analyzers on each loaded part and adds the step timeline and, for
traces of several hosts, the per-host step-time skew; its ``PartResult`` list is what every
renderer takes. ``analyze()`` is the one-call form, ``check()`` checks runs against CI budgets
(docs/ci.md), and ``Analysis`` the notebook facade: it loads once, then each method returns a
DataFrame and each ``plot_*`` method a plotly figure (never shown here: display it, or
``fig.show()``), delegating in one line each, so notebooks and the HTML report show the same
thing.

Longer than the ~350 lines a module here aims for: the notebook facade has one short method per
table or figure, each delegating in a line or two; splitting them would scatter the API users read.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from xlaprof.analysis.checks import run_analyzers
from xlaprof.findings import Finding
from xlaprof.load import DEFAULT_MAX_INPUT_BYTES

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from xlaprof.analysis.budgets import Budgets, CheckResult
    from xlaprof.analysis.trace import Trace
    from xlaprof.load import Part


@dataclass
class PartResult:
    part: Part
    findings: list[Finding]
    timeline: pd.DataFrame | None = None
    host_skew: pd.DataFrame | None = None
    # The profiler trace (a capture, or a run directory's trace window): device tables.
    trace: Trace | None = None
    # several hosts: one row per (host, device, step), and the stragglers among them
    host_steps: pd.DataFrame | None = None
    stragglers: pd.DataFrame | None = None


def analyze_parts(
    parts: list[Part], source_root: str | os.PathLike[str] | None = None
) -> list[PartResult]:
    """Analyze each part. Source lines are read only under ``source_root`` (default: a run's
    recorded working directory, if it exists here; see ``analysis/sourcefiles.py``)."""
    from xlaprof.analysis.hosts import host_skew
    from xlaprof.analysis.pod import host_steps
    from xlaprof.analysis.sourcefiles import recorded_root, source_roots
    from xlaprof.analysis.stragglers import stragglers
    from xlaprof.analysis.timeline import device_busy_by_step, step_timeline

    results = []
    for part in parts:
        root = source_root
        if root is None and part.run is not None:
            root = recorded_root(part.run.info.cwd)  # a real project folder only
        with source_roots(root) as roots:
            result = PartResult(part, run_analyzers(part.data))
            note_withheld(part, roots)
        trace = part.trace
        if trace is None and part.run is not None and part.run.trace_files():
            from xlaprof.analysis.trace import load_trace

            window = part.run.info.trace_steps
            trace = load_trace(part.run.path, first_step=window[0] if window else 0)
        if part.data.steps or trace is not None:
            events = None if trace is None else trace.events
            if trace is not None and trace.source is not None:  # a pod: the first host only
                events = trace.select(hosts=trace.hosts[:1])
            busy = None
            if trace is not None and events is not None:
                busy = device_busy_by_step(trace.tracing_vs_device(), events)
            result.timeline = step_timeline(
                part.data.steps, events, None if trace is None else trace.step_bounds, busy
            )
        if trace is not None and len(trace.hosts) > 1:
            result.host_skew = host_skew(trace.step_times())
            result.host_steps = host_steps(trace)
            result.stragglers = stragglers(result.host_steps)
        result.trace = trace
        results.append(result)
    return results


def note_withheld(part: Part, roots: tuple[Path, ...]) -> None:
    """Say in the part's warnings (console notes, ``--json``, HTML) which source files exist
    here but were not quoted, and how to allow them (``analysis/sourcefiles.py``)."""
    from xlaprof.analysis.sourcefiles import withheld, withheld_note
    from xlaprof.parse.metrics_report import ParseWarning

    note = withheld_note(withheld(), roots)
    if note is None:
        return
    run = part.extra.get("run")
    if run is not None:
        run["warnings"].append(note)
    elif part.sources:
        part.sources[0].warnings.append(ParseWarning(line=0, text="", reason=note))


def analyze(
    *paths: str | os.PathLike[str],
    warmup_steps: int = 2,
    source_root: str | os.PathLike[str] | None = None,
) -> list[Finding]:
    """Findings for report/log files, run directories or trace logdirs, most severe first."""
    from xlaprof.load import load_parts

    parts = load_parts([Path(p) for p in paths], DEFAULT_MAX_INPUT_BYTES, warmup_steps)
    return [f for result in analyze_parts(parts, source_root) for f in result.findings]


def check(
    *runs: str | os.PathLike[str],
    max_recompilations: int | None = None,
    max_host_syncs_per_step: float | None = None,
    max_fallback_ops: int | None = None,
    allow_fallback: tuple[str, ...] | list[str] = (),
    max_graphs: int | None = None,
    forbid: tuple[str, ...] | list[str] = (),
    baseline: str | os.PathLike[str] | None = None,
    max_step_time_ratio: float | None = None,
    max_compile_seconds: float | None = None,
    warmup_steps: int | None = None,
    allow_unmeasured: bool | None = None,
    budget_file: str | os.PathLike[str] | None = None,
) -> CheckResult:
    """Check runs against budgets, as ``xlaprof check`` does: for pytest and scripts.

    ``result = xlaprof.check("runs/ci", max_recompilations=0)``, then ``assert result.ok,
    result``: ``str(result)`` lists each budget with its value, limit and verdict and, for a
    failure, the finding that explains it at the user's source line. Budgets given here override
    those of ``budget_file`` (a TOML file: its ``[tool.xlaprof.check]`` table, or its top level);
    no pyproject.toml is read unless given. A budget whose figure the run did not measure fails
    unless ``allow_unmeasured``. Bad input raises an ``XlaprofError`` (``BudgetError`` for
    invalid budgets). The budgets are documented in docs/ci.md.
    """
    from xlaprof.analysis.budgets import Budgets

    budgets = Budgets() if budget_file is None else Budgets.from_file(Path(budget_file))
    budgets = budgets.updated(
        max_recompilations=max_recompilations,
        max_host_syncs_per_step=max_host_syncs_per_step,
        max_fallback_ops=max_fallback_ops,
        allow_fallback=tuple(allow_fallback),
        max_graphs=max_graphs,
        forbid=tuple(forbid),
        baseline=None if baseline is None else Path(baseline),
        max_step_time_ratio=max_step_time_ratio,
        max_compile_seconds=max_compile_seconds,
        warmup_steps=warmup_steps,
        allow_unmeasured=allow_unmeasured,
    )
    return check_budgets([Path(r) for r in runs], budgets)


def check_budgets(paths: list[Path], budgets: Budgets) -> CheckResult:
    """Load ``paths`` (and the budgets' baseline), find what is wrong, check ``budgets``."""
    from xlaprof.analysis.budgets import evaluate
    from xlaprof.errors import BudgetError
    from xlaprof.load import load_parts

    budgets.validate()
    if not paths:
        raise BudgetError("no run to check")

    def results(path: Path) -> list[PartResult]:
        # Budgets read findings and per-step rows only: no trace is loaded, no timeline built.
        from xlaprof.analysis.sourcefiles import recorded_root, source_roots

        parts = load_parts([path], DEFAULT_MAX_INPUT_BYTES, budgets.warmup_steps)
        checked = []
        for part in parts:
            with source_roots(recorded_root(part.run.info.cwd) if part.run else None) as roots:
                checked.append(PartResult(part, run_analyzers(part.data)))
                note_withheld(part, roots)
        return checked

    checked = [result for path in paths for result in results(path)]
    baseline = None if budgets.baseline is None else results(budgets.baseline)
    return evaluate(budgets, checked, baseline)


class Analysis:
    """Everything xlaprof knows about one run (or one process of it)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        process: str | None = None,
        warmup_steps: int = 2,
        session: str | None = None,
        source_root: str | os.PathLike[str] | None = None,
        warn: bool = True,
    ) -> None:
        from xlaprof.errors import RunDirError
        from xlaprof.load import load_parts

        parts = load_parts([Path(path)], DEFAULT_MAX_INPUT_BYTES, warmup_steps, session)
        if process is not None:
            parts = [p for p in parts if p.name == process]
            if not parts:
                raise RunDirError(f"{path}: no process run named {process!r}")
        self.path = Path(path)
        self.processes = [p.name for p in parts]
        # A run of several processes: one is analyzed here, and the user is told which.
        self.note: str | None = None
        if len(parts) > 1:
            self.note = (
                f"{path} holds {len(parts)} process runs ({', '.join(self.processes[:8])}"
                f"{', ...' if len(parts) > 8 else ''}): showing {parts[0].name} only; "
                "pass process=NAME (--process NAME) for another"
            )
            if warn:
                warnings.warn(self.note, stacklevel=2)
        self.result: PartResult = analyze_parts(parts[:1], source_root)[0]

    @classmethod
    def from_result(cls, result: PartResult) -> Analysis:
        """The facade over an analysis already made (the HTML report uses it)."""
        analysis = cls.__new__(cls)
        analysis.path = Path(result.part.sources[0].path if result.part.sources else ".")
        analysis.processes = [result.part.name]
        analysis.note = None
        analysis.result = result
        return analysis

    # -- tables --------------------------------------------------------------------------
    @property
    def run(self):  # type: ignore[no-untyped-def]
        return self.result.part.run

    def findings(self) -> pd.DataFrame:
        import pandas as pd

        rows = [
            {
                "severity": f.severity.value,
                "kind": f.kind.value,
                "title": f.title,
                "location": None if f.location is None else str(f.location),
                "suggestion": f.suggestion,
                "evidence": f.evidence,
            }
            for f in self.result.findings
        ]
        columns = ["severity", "kind", "title", "location", "suggestion", "evidence"]
        return pd.DataFrame(rows, columns=columns)

    def steps(self) -> pd.DataFrame:
        import pandas as pd

        return self.run.steps() if self.run is not None else pd.DataFrame()

    def events(self) -> pd.DataFrame:
        import pandas as pd

        return self.run.events() if self.run is not None else pd.DataFrame()

    def compiles(self) -> pd.DataFrame:
        import pandas as pd

        return self.run.compiles() if self.run is not None else pd.DataFrame()

    def regions(self) -> pd.DataFrame:
        import pandas as pd

        return self.run.regions_frame() if self.run is not None else pd.DataFrame()

    def timeline(self) -> pd.DataFrame:
        import pandas as pd

        return self.result.timeline if self.result.timeline is not None else pd.DataFrame()

    def host_skew(self) -> pd.DataFrame:
        import pandas as pd

        return self.result.host_skew if self.result.host_skew is not None else pd.DataFrame()

    def host_steps(self) -> pd.DataFrame:
        """Several hosts: one row per (host, device, step) (``pod.host_steps``)."""
        import pandas as pd

        return self.result.host_steps if self.result.host_steps is not None else pd.DataFrame()

    def stragglers(self) -> pd.DataFrame:
        """Several hosts: per step and device, the slowest host and why (``stragglers``)."""
        import pandas as pd

        return self.result.stragglers if self.result.stragglers is not None else pd.DataFrame()

    def trace(self) -> Trace | None:
        """The profiler trace (loaded on first use), or None if the run has none."""
        if not hasattr(self, "_trace"):
            from xlaprof.analysis.trace import load_trace

            part = self.result.part
            if self.result.trace is not None:
                self._trace = self.result.trace
            elif part.trace is not None:
                self._trace = part.trace
            elif self.run is not None and self.run.trace_files():
                window = self.run.info.trace_steps
                self._trace = load_trace(self.run.path, first_step=window[0] if window else 0)
            else:
                self._trace = None
        return self._trace

    def device_steps(self) -> pd.DataFrame:
        """Per device and step: wall, busy, idle, duty, seconds per category (traces only)."""
        import pandas as pd

        trace = self.trace()
        return trace.device_steps() if trace is not None else pd.DataFrame()

    def device_ops(self) -> pd.DataFrame:
        """Per device and op: occurrences, total/self time, FLOPs, bytes, rates, bound."""
        import pandas as pd

        trace = self.trace()
        return trace.device_ops() if trace is not None else pd.DataFrame()

    def device_utilization(self) -> pd.DataFrame:
        """Per device over the capture: span, busy, idle, duty cycle, per-category seconds."""
        import pandas as pd

        trace = self.trace()
        return trace.device_utilization() if trace is not None else pd.DataFrame()

    def tracing_vs_device(self) -> pd.DataFrame:
        """Per host step: lazy-tensor tracing time against device busy (tracing-bound?)."""
        import pandas as pd

        trace = self.trace()
        return trace.tracing_vs_device() if trace is not None else pd.DataFrame()

    def summary(self) -> dict[str, object]:
        from xlaprof.analysis.compare import run_summary

        return run_summary(self.result.part.data)

    def compare(self, after: Analysis) -> pd.DataFrame:
        """This run as *before*, ``after`` as after: figures, ratios and the change in words."""
        from xlaprof.analysis.compare import compare

        return compare(self.summary(), after.summary())

    # -- figures -------------------------------------------------------------------------
    def plot_timeline(self) -> go.Figure:
        from xlaprof.report import figures

        return figures.step_timeline(self.timeline())

    def plot_compilations(self) -> go.Figure:
        from xlaprof.report import figures

        return figures.compilations(self.steps(), self.compiles())

    def plot_regions(self) -> go.Figure:
        from xlaprof.report import figures

        return figures.top_regions(self.regions())

    def plot_device_ops(self) -> go.Figure:
        from xlaprof.report import figures

        # No trace at all is "not captured", not "no device ops".
        return figures.top_device_ops(self.device_ops() if self.trace() is not None else None)

    def plot_device_steps(self) -> go.Figure:
        from xlaprof.report import figures

        return figures.device_steps(self.device_steps() if self.trace() is not None else None)

    def plot_host_steps(self) -> go.Figure:
        from xlaprof.report import figures

        return figures.host_step_heatmap(self.host_steps(), self.stragglers())

    def plot_metric_deltas(self) -> go.Figure:
        from xlaprof.report import figures

        return figures.metric_deltas(self.steps())

    def plot_compare(self, after: Analysis) -> go.Figure:
        from xlaprof.report import figures

        return figures.before_after(self.compare(after))
