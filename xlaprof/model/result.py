"""The result model: what the analysis of one part produced, as every renderer reads it.

``PartResult`` holds the part, its findings and the tables made for it (step timeline, host
skew, per-host steps, stragglers) and the trace with its device model. Its methods return those
as DataFrames (an empty frame where the input had nothing to say), so the notebook facade, the
HTML report and the console show the same tables without computing anything again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.findings import Finding
    from xlaprof.model.input import HostActivity
    from xlaprof.model.parts import Part
    from xlaprof.model.trace import Trace
    from xlaprof.rundir.reader import Run

FINDING_COLUMNS = ["severity", "kind", "title", "location", "suggestion", "evidence"]


@dataclass
class StepStory:
    """Where a run's steady step goes, as the console and HTML report open with it
    (``xlaprof.tables.story``). Seconds; None where not measured.

    ``median_step`` is the steady step (after warm-up, compiling nothing) of median wall time
    and ``parts`` its wall time by part (compile, tracing, transfer, device), which add up to
    it; ``bound`` is its largest part and ``bound_share`` that part's share; ``bound_steps``
    counts the steady steps by bound. ``worth_most`` is the finding that answers the bound
    (set by the pipeline, which has the findings).
    """

    steps: int
    warmup_steps: int
    steady_steps: int
    warmup_compile_s: float | None = None
    later_compile_steps: list[int] = field(default_factory=list)
    later_compile_s: float | None = None
    median_step: int | None = None
    median_wall_s: float | None = None
    parts: dict[str, float | None] = field(default_factory=dict)
    device_busy_s: float | None = None
    bound: str | None = None
    bound_share: float | None = None
    bound_steps: dict[str, int] = field(default_factory=dict)
    worth_most: Finding | None = None

    def to_json(self) -> dict[str, object]:
        """The ``story`` object of the ``--json`` document (docs/json-format.md)."""
        document = {k: v for k, v in self.__dict__.items() if k != "worth_most"}
        document["worth_most"] = None if self.worth_most is None else self.worth_most.to_json()
        return document


@dataclass
class PartResult:
    """One part analyzed (``xlaprof.pipeline.analyze_parts``)."""

    part: Part
    findings: list[Finding]
    timeline: pd.DataFrame | None = None
    host_skew: pd.DataFrame | None = None
    # The profiler trace (a capture, or a run directory's trace window): device tables.
    trace: Trace | None = None
    # several hosts: one row per (host, device, step) (a pod's stay on disk: None here, read
    # by ``host_steps_frame``), and the stragglers among them
    host_steps: pd.DataFrame | None = None
    stragglers: pd.DataFrame | None = None
    # The step model's summary: where a steady step goes (tables/story.py).
    story: StepStory | None = None
    # A capture without device planes: the host's time per step and hottest functions
    # (tables/host_steps.py); TORCH_TRACE logs: one row per compile (tables/torch_compiles.py).
    host_activity: HostActivity | None = None
    torch_compiles: pd.DataFrame | None = None

    @property
    def run(self) -> Run | None:
        return self.part.run

    def findings_frame(self) -> pd.DataFrame:
        """One row per finding: severity, kind, title, location, suggestion, evidence."""
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
            for f in self.findings
        ]
        return pd.DataFrame(rows, columns=FINDING_COLUMNS)

    def steps_frame(self) -> pd.DataFrame:
        """The run's per-step rows (run directories only)."""
        return self.run.steps() if self.run is not None else _empty()

    def events_frame(self) -> pd.DataFrame:
        return self.run.events() if self.run is not None else _empty()

    def compiles_frame(self) -> pd.DataFrame:
        return self.run.compiles() if self.run is not None else _empty()

    def regions_frame(self) -> pd.DataFrame:
        return self.run.regions_frame() if self.run is not None else _empty()

    def timeline_frame(self) -> pd.DataFrame:
        return _or_empty(self.timeline)

    def host_skew_frame(self) -> pd.DataFrame:
        return _or_empty(self.host_skew)

    def host_steps_frame(self) -> pd.DataFrame:
        """Several hosts: one row per (host, device, step); a pod's are read from disk."""
        trace = self.trace
        if self.host_steps is None and trace is not None and trace.source is not None:
            return trace.source.host_steps()
        return _or_empty(self.host_steps)

    def stragglers_frame(self) -> pd.DataFrame:
        return _or_empty(self.stragglers)

    def host_activity_frame(self) -> pd.DataFrame:
        return _or_empty(None if self.host_activity is None else self.host_activity.steps)

    def host_hot_frame(self) -> pd.DataFrame:
        return _or_empty(None if self.host_activity is None else self.host_activity.hot)

    def torch_compiles_frame(self) -> pd.DataFrame:
        return _or_empty(self.torch_compiles)

    def device_steps(self) -> pd.DataFrame:
        return self.trace.device_steps() if self.trace is not None else _empty()

    def device_ops(self) -> pd.DataFrame:
        return self.trace.device_ops() if self.trace is not None else _empty()

    def device_utilization(self) -> pd.DataFrame:
        return self.trace.device_utilization() if self.trace is not None else _empty()

    def tracing_vs_device(self) -> pd.DataFrame:
        return self.trace.tracing_vs_device() if self.trace is not None else _empty()

    def bottlenecks(self) -> pd.DataFrame:
        return self.trace.bottlenecks() if self.trace is not None else _empty()

    def device_time_by_line(self, per_device: bool = False) -> pd.DataFrame:
        if self.trace is None:
            return _empty()
        return self.trace.device_time_by_line(per_device)


def _empty() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame()


def _or_empty(frame: pd.DataFrame | None) -> pd.DataFrame:
    return frame if frame is not None else _empty()


@dataclass
class AnalysisResult:
    """One ``xlaprof analyze`` or ``xlaprof report``: every part analyzed, in input order."""

    parts: list[PartResult]


@dataclass
class RunComparison:
    """``xlaprof diff``: two runs' figures side by side (``xlaprof.tables.compare``) and the
    titles of findings that disappeared and appeared."""

    before: str
    after: str
    table: pd.DataFrame
    gone: list[str]
    came: list[str]
