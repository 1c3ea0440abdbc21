"""What the inputs stage hands to the analysis: one ``Part`` per job output (a set of report and
log files, one process's run directory, or one capture), with where each input came from."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xlaprof.model.input import AnalysisInput
    from xlaprof.model.trace import Trace
    from xlaprof.parse.metrics_report import ParseWarning
    from xlaprof.rundir.reader import Run


@dataclass
class SourceInfo:
    """What was found in one input path (reported with ``--json`` under ``sources``)."""

    path: str
    kinds: list[str]
    reports: int = 0
    debug_events: int = 0
    warnings: list[ParseWarning] = field(default_factory=list)


@dataclass(frozen=True)
class RunSummary:
    """How one process's run went, from its ``run.json`` (``--json`` under ``run``)."""

    path: str
    schema: int
    status: str
    exit_code: int | None
    detail: str | None
    steps_recorded: int
    device_kind: str | None
    device_count: int | None
    rank: int | None
    torch_xla_version: str | None
    traces: list[str]
    warnings: list[str]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Part:
    """One analysis unit: a set of text files, one process's run directory, or one capture.

    ``run_summary`` is set for a run directory; ``trace`` for a capture (and loaded later for
    a run with a trace window); ``trace_path`` is the path a capture was given as.
    """

    name: str
    data: AnalysisInput
    sources: list[SourceInfo]
    run: Run | None = None
    trace: Trace | None = None
    run_summary: RunSummary | None = None
    trace_path: str | None = None

    @property
    def trace_only(self) -> bool:
        """A capture alone: device tables, and no report, log or run for the analyzers."""
        return self.trace is not None and not self.data.reports and self.data.debug.empty
