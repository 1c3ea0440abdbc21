"""The Python facade: ``analyze``, ``check`` and the notebook class ``Analysis``.

``analyze()`` is the one-call form of ``xlaprof analyze``, ``check()`` checks runs against CI
budgets (docs/ci.md), and ``Analysis`` the notebook facade: it loads once, then each method
returns a DataFrame and each ``plot_*`` method a plotly figure (never shown here: display it,
or ``fig.show()``), delegating in one line each to the result model
(``xlaprof.model.result``) and the figures (``xlaprof.report.figures``), so notebooks and the
HTML report show the same thing. Nothing inside the package imports this module.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from xlaprof import pipeline
from xlaprof.model.request import AnalysisRequest, PodSettings

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from xlaprof.budgets import CheckResult
    from xlaprof.findings import Finding
    from xlaprof.model.result import PartResult


def analyze(
    *paths: str | os.PathLike[str],
    warmup_steps: int = 2,
    source_root: str | os.PathLike[str] | None = None,
) -> list[Finding]:
    """Findings for report/log files, run directories or trace logdirs, most severe first
    (a folder of several runs: its latest)."""
    request = AnalysisRequest.of(
        *paths, warmup_steps=warmup_steps, source_root=_path(source_root), pod=_environment()
    )
    return [f for result in pipeline.analyze(request).parts for f in result.findings]


def _environment() -> PodSettings:
    """How a capture of several hosts is read, as the environment sets it: read here, where
    the facade starts, and carried by the request (nothing below reads the environment)."""
    return PodSettings.of(os.environ)


def _empty() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame()


def _path(path: str | os.PathLike[str] | None) -> Path | None:
    return None if path is None else Path(path)


# Public API: each budget is a keyword argument, as ``xlaprof check`` has a flag for each.
def check(  # noqa: PLR0913
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
    source_root: str | os.PathLike[str] | None = None,
) -> CheckResult:
    """Check runs against budgets, as ``xlaprof check`` does: for pytest and scripts.

    ``result = xlaprof.check("runs/ci", max_recompilations=0)``, then ``assert result.ok,
    result``: ``str(result)`` lists each budget with its value, limit and verdict and, for a
    failure, the finding that explains it at the user's source line. Budgets given here override
    those of ``budget_file`` (a TOML file: its ``[tool.xlaprof.check]`` table, or its top level);
    no pyproject.toml is read unless given. A budget whose figure the run did not measure fails
    unless ``allow_unmeasured``. ``source_root``: the folder whose source files the findings
    may quote, as ``--source-root`` (default: a run's recorded working directory, if it
    exists here). Bad input raises an ``XlaprofError`` (``BudgetError`` for
    invalid budgets). The budgets are documented in docs/ci.md.
    """
    from xlaprof.budgets import Budgets

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
    request = AnalysisRequest.of(*runs, source_root=_path(source_root), pod=_environment())
    return pipeline.check(request, budgets)


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
        self.path = Path(path)
        self.request = AnalysisRequest(
            (self.path,),
            process=process,
            session=session,
            warmup_steps=warmup_steps,
            source_root=_path(source_root),
            pod=_environment(),
        )
        analyzed = pipeline.analyze(self.request).one()
        self.result = analyzed.parts[0]
        self.processes = analyzed.processes
        self.note = "; ".join(analyzed.notes) or None
        # A run of several processes: one is analyzed here, and the user is told which.
        if self.note and warn:
            warnings.warn(self.note, stacklevel=2)

    @classmethod
    def from_result(cls, result: PartResult) -> Analysis:
        """The facade over an analysis already made."""
        analysis = cls.__new__(cls)
        analysis.path = Path(result.part.sources[0].path if result.part.sources else ".")
        analysis.request = AnalysisRequest((analysis.path,))
        analysis.processes = [result.part.name]
        analysis.note = None
        analysis.result = result
        return analysis

    # -- tables --------------------------------------------------------------------------
    def findings(self) -> pd.DataFrame:
        return self.result.findings_frame()

    def steps(self) -> pd.DataFrame:
        """A run's rows per step (wall time, metric deltas), as the result holds them whole."""
        return self._run_table("steps")

    def events(self) -> pd.DataFrame:
        """A run's compilations and executions, one row each, with the user's source line."""
        return self._run_table("events", saved=False)

    def compiles(self) -> pd.DataFrame:
        return self._run_table("compiles")

    def regions(self) -> pd.DataFrame:
        return self._run_table("regions", saved=False)

    def _run_table(self, name: str, saved: bool = True) -> pd.DataFrame:
        """A run's own table ``name``, every row, as the result holds it; a saved result
        holds no run's rows: the columns its figures draw, as its document kept them
        (``saved``), else an empty table."""
        frame = self.result.table(name)
        if frame is None and saved:
            frame = self.result.frame(name)
        return frame if frame is not None else _empty()

    def timeline(self) -> pd.DataFrame:
        return self.result.timeline_frame()

    def host_skew(self) -> pd.DataFrame:
        return self.result.host_skew_frame()

    def host_steps(self) -> pd.DataFrame:
        """Several hosts: one row per (host, device, step) (``pod.host_steps``; a pod's are
        read from its workers' files)."""
        return self.result.host_steps_frame()

    def stragglers(self) -> pd.DataFrame:
        """Several hosts: per step and device, the slowest host and why (``stragglers``)."""
        return self.result.stragglers_frame()

    def host_activity(self) -> pd.DataFrame:
        """A capture without device planes: per step, the host's ms by what it did
        (``tables.host_steps``); empty otherwise."""
        return self.result.host_activity_frame()

    def host_hot(self) -> pd.DataFrame:
        """A capture without device planes: each step's hottest Python functions and aten ops."""
        return self.result.host_hot_frame()

    def torch_compiles(self) -> pd.DataFrame:
        """TORCH_TRACE logs: one row per torch.compile compile (``tables.torch_compiles``)."""
        return self.result.torch_compiles_frame()

    def device_steps(self) -> pd.DataFrame:
        """Per device and step: wall, busy, idle, duty, seconds per category (traces only)."""
        return self.result.device_steps()

    def device_ops(self) -> pd.DataFrame:
        """Per device and op: occurrences, total/self time, FLOPs, bytes, rates, bound."""
        return self.result.device_ops()

    def device_utilization(self) -> pd.DataFrame:
        """Per device over the capture: span, busy, idle, duty cycle, per-category seconds."""
        return self.result.device_utilization()

    def tracing_vs_device(self) -> pd.DataFrame:
        """Per host step: lazy-tensor tracing time against device busy (tracing-bound?)."""
        return self.result.tracing_vs_device()

    def bottlenecks(self) -> pd.DataFrame:
        """Per device and step: seconds per cause and the one that bounds the step (traces)."""
        return self.result.bottlenecks()

    def device_time_by_line(self, per_device: bool = False) -> pd.DataFrame:
        """Device op time per user source line, from the capture's HLO (traces only)."""
        return self.result.device_time_by_line(per_device)

    def summary(self) -> dict[str, object]:
        """The run's figures as ``xlaprof diff`` compares them (the pipeline's: its median
        step is the story's)."""
        return dict(self.result.figures)

    def compare(self, after: Analysis) -> pd.DataFrame:
        """This run as *before*, ``after`` as after: figures, ratios and the change in words."""
        return pipeline.figures_compared(self.summary(), after.summary())

    # -- figures -------------------------------------------------------------------------
    def plot_timeline(self) -> go.Figure:
        """The step chart of the steps the result kept (a long run's: at most 2,000, chosen
        as ``tables.bounded`` says; the figure says so), as the HTML report draws it;
        ``timeline()`` has every row."""
        from xlaprof.report import figures

        result = self.result
        return figures.step_timeline(result.timeline, result.rows_kept.get("timeline"))

    def plot_compilations(self) -> go.Figure:
        from xlaprof.report import figures

        return figures.compilations(self.steps(), self.compiles())

    def plot_regions(self) -> go.Figure:
        from xlaprof.report import figures

        return figures.top_regions(self.regions())

    def plot_device_ops(self) -> go.Figure:
        from xlaprof.report import figures

        # No capture at all is "not captured", not "no device ops"; the top ops are the
        # pipeline's (the HTML report's), a saved result's included.
        return figures.top_device_ops(self.result.frame("device_ops"))

    def plot_device_steps(self) -> go.Figure:
        from xlaprof.report import figures

        return figures.device_steps(self.device_steps() if self.result.part.traced else None)

    def plot_host_steps(self) -> go.Figure:
        """The host x step heat map of the steps the result kept (a long run's: the first and
        the worst, ``tables.bounded``; the figure says so), as the HTML report draws it;
        ``host_steps()`` and ``stragglers()`` have every row."""
        from xlaprof.report import figures

        result = self.result
        cut = result.rows_kept.get("frame:host_steps")
        return figures.host_step_heatmap(result.frame("host_steps"), result.stragglers, cut)

    def plot_metric_deltas(self) -> go.Figure:
        from xlaprof.report import figures

        return figures.metric_deltas(self.steps())

    def plot_compare(self, after: Analysis) -> go.Figure:
        from xlaprof.report import figures

        return figures.before_after(self.compare(after))
