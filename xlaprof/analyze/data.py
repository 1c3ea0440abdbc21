"""What analyzers read: parsed reports, debug logs and (from run directories) per-step rows."""

from __future__ import annotations

from dataclasses import dataclass, field

from xlaprof.parse.debug_log import DebugEvent, DebugLog
from xlaprof.parse.hlo import HloModule
from xlaprof.parse.metrics_report import MetricsReport

# Metric names differ across torch_xla generations (XRT said "Server").
COMPILE_METRICS = ("CompileTime",)
EXECUTE_METRICS = ("ExecuteTime",)
FROM_DEVICE_METRICS = ("TransferFromDeviceTime", "TransferFromServerTime")
TO_DEVICE_METRICS = ("TransferToDeviceTime", "TransferToServerTime")
HOST_SYNC_OP = "aten::_local_scalar_dense"


@dataclass
class StepRow:
    """One training step's deltas, as recorded by ``xlaprof run``/``profile`` (run directory).

    Times are seconds, counts are numbers of events in this step. ``debug_offset`` and
    ``fallback_offset`` are the sizes of debug.log / fallbacks.log when the step ended, which is
    how events in those logs are tied to steps.
    """

    step: int
    start: float | None = None
    wall_s: float | None = None
    host_cpu_s: float | None = None  # CPU time of the thread that ran the step
    compiles: int = 0
    compile_s: float = 0.0
    executions: int = 0
    execute_s: float = 0.0
    transfers_to_device: int = 0
    to_device_s: float = 0.0
    transfers_from_device: int = 0
    from_device_s: float = 0.0
    tracing_s: float = 0.0
    graph_nodes: float | None = None
    ops: int | None = None  # lowered (xla::) op calls traced in this step
    aten: dict[str, int] = field(default_factory=dict)
    debug_offset: int | None = None
    fallback_offset: int | None = None


@dataclass
class GraphInfo:
    """One compiled graph: its place in compile order, its step, and its parsed HLO."""

    order: int
    step: int | None
    module: str
    hlo: HloModule | None = None  # None when the graph was too large or too many to keep
    skipped: str | None = None
    graph_hash: str | None = None  # from its compilation event (see link_graphs)


@dataclass(frozen=True)
class RegionRow:
    """Host time of one user region (``xlaprof.region``) in one step."""

    step: int
    name: str
    calls: int
    seconds: float


@dataclass
class AnalysisInput:
    """Everything the analyzers may use. Any part can be empty."""

    reports: list[MetricsReport] = field(default_factory=list)
    debug: DebugLog = field(default_factory=DebugLog)
    steps: list[StepRow] = field(default_factory=list)
    warmup_steps: int = 2
    regions: list[RegionRow] = field(default_factory=list)
    # step -> {"file:line" or "<library>": host CPU seconds} from the session's sampler
    host_samples: dict[int, dict[str, float]] = field(default_factory=dict)
    cxx11_abi: bool | None = None
    graphs: list[GraphInfo] = field(default_factory=list)  # in compile order
    device_memory: dict[str, int] | None = None  # bytes_used / bytes_limit, where recorded
    script: str | None = None  # the profiled script (for `xlaprof bench` commands)

    # Counters and metrics are cumulative, so each value comes from the latest report that
    # has it: a truncated last snapshot must not hide what earlier ones showed.
    def metric_samples(self, *names: str) -> int | None:
        for report in reversed(self.reports):
            value = report.metric_samples(*names)
            if value is not None:
                return value
        return None

    def metric_total(self, *names: str) -> float | None:
        for report in reversed(self.reports):
            value = report.metric_total(*names)
            if value is not None:
                return value
        return None

    def counters(self) -> dict[str, int | None]:
        merged: dict[str, int | None] = {}
        for report in self.reports:
            for name, value in report.counters.items():
                if value is not None or name not in merged:
                    merged[name] = value
        return merged

    def compiles(self) -> int | None:
        if self.reports:
            value = self.metric_samples(*COMPILE_METRICS)
            if value is not None:
                return value
        if self.steps:
            return sum(s.compiles for s in self.steps)
        compilations = self.debug.compilations()
        return len(compilations) if compilations else None

    def executions(self) -> int | None:
        if self.reports:
            value = self.metric_samples(*EXECUTE_METRICS)
            if value is not None:
                return value
        if self.steps:
            return sum(s.executions for s in self.steps)
        executions = self.debug.executions()
        return len(executions) if executions else None

    def device_to_host_transfers(self) -> int | None:
        if self.reports:
            value = self.metric_samples(*FROM_DEVICE_METRICS)
            # A report without the metric means none happened (torch_xla omits empty metrics).
            return 0 if value is None else value
        if self.steps:
            return sum(s.transfers_from_device for s in self.steps)
        return None

    def aten_counters(self) -> dict[str, int | None]:
        """Every ``aten::`` counter, including ``_local_scalar_dense``."""
        if self.reports:
            return {k: v for k, v in self.counters().items() if k.startswith("aten::")}
        totals: dict[str, int | None] = {}
        for row in self.steps:
            for name, value in row.aten.items():
                totals[name] = (totals.get(name) or 0) + value
        return totals

    def aten_fallbacks(self) -> dict[str, int | None]:
        """``aten::`` counters that are op fallbacks (``_local_scalar_dense`` is a host sync)."""
        return {k: v for k, v in self.aten_counters().items() if k != HOST_SYNC_OP}

    def step_count(self) -> int | None:
        if self.steps:
            return len(self.steps)
        if self.reports:
            return self.counters().get("MarkStep")
        return None


def link_graphs(graphs: list[GraphInfo], compilations: list[DebugEvent]) -> dict[int, GraphInfo]:
    """Tie each compilation event to its graph and set the graph's hash.

    Both are in compile order: with equal counts they pair one to one; otherwise each event
    takes the next graph compiled at the same step. Returns ``id(event) -> graph``.
    """
    if not graphs:
        return {}
    if len(graphs) == len(compilations):
        pairs = list(zip(compilations, graphs, strict=True))
    else:
        by_step: dict[int | None, list[GraphInfo]] = {}
        for graph in graphs:
            by_step.setdefault(graph.step, []).append(graph)
        pairs = []
        for event in compilations:
            pending = by_step.get(event.step)
            if pending:
                pairs.append((event, pending.pop(0)))
    for event, graph in pairs:
        graph.graph_hash = event.graph_hash
    return {id(event): graph for event, graph in pairs}
