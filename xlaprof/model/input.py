"""What analyzers read: parsed reports, debug logs and (from run directories) per-step rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xlaprof.model.sources import SourceFiles
from xlaprof.model.warmup import first_steady_of, first_steady_of_rows, first_steady_step
from xlaprof.parse.debug_log import DebugLog
from xlaprof.parse.dynamo_log import DynamoRecord, parse_dynamo_records
from xlaprof.parse.metrics_report import HOST_SYNC_OP, MetricsReport
from xlaprof.parse.torch_trace import TorchTraceLog
from xlaprof.rundir.executions import RunDevice, attribute
from xlaprof.rundir.schema import ExecutionRow, GraphInfo, RegionRow, StepRow

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.model.trace import Trace
    from xlaprof.rundir.reader import Run

# Metric names differ across torch_xla generations (XRT said "Server").
COMPILE_METRICS = ("CompileTime",)
EXECUTE_METRICS = ("ExecuteTime",)
# Eager mode compiles and runs each op as its own graph and records these instead (torch_xla
# 2.x): a run's compiles and executions are both kinds together (the UncachedCompile and
# ExecuteComputation counters), while graph-level analyses read the graph metrics alone.
EAGER_COMPILE_METRICS = ("EagerOpCompileTime",)
EAGER_EXECUTE_METRICS = ("EagerOpExecuteTime",)
FROM_DEVICE_METRICS = ("TransferFromDeviceTime", "TransferFromServerTime")
TO_DEVICE_METRICS = ("TransferToDeviceTime", "TransferToServerTime")


@dataclass
class HostActivity:
    """A capture's steps as its host lived them (``xlaprof.tables.host_steps``): how the steps
    were found, per step the host's time by what it did (``HOST_STEP_COLUMNS``), the hottest
    Python functions and aten ops per step (``HOT_COLUMNS``), and whether the capture has any
    device plane (without one, device time is not measured)."""

    source: str
    steps: pd.DataFrame
    hot: pd.DataFrame
    device_planes: bool


@dataclass
class AnalysisInput:
    """Everything the analyzers may use. Any part can be empty."""

    reports: list[MetricsReport] = field(default_factory=list)
    debug: DebugLog = field(default_factory=DebugLog)
    steps: list[StepRow] = field(default_factory=list)
    # each graph execution's launch and completion (executions.jsonl); None: not recorded
    execution_rows: list[ExecutionRow] | None = None
    warmup_steps: int = 2
    regions: list[RegionRow] = field(default_factory=list)
    # step -> {"file:line" or "<library>": host CPU seconds} from the session's sampler
    host_samples: dict[int, dict[str, float]] = field(default_factory=dict)
    cxx11_abi: bool | None = None
    graphs: list[GraphInfo] = field(default_factory=list)  # in compile order
    device_memory: dict[str, int] | None = None  # bytes_used / bytes_limit, where recorded
    script: str | None = None  # the profiled script (for `xlaprof bench` commands)
    # the device the run ran on as torch_xla names it ("CPU", "TPU"); None: not recorded
    device_kind: str | None = None
    dynamo: list[DynamoRecord] = field(default_factory=list)  # torch.compile's own records
    # TORCH_TRACE logs (one per process/rank), the first rank's compiles also in ``dynamo``
    torch_traces: list[TorchTraceLog] = field(default_factory=list)
    # module stacks and repeated module calls of one step (capture/modules.py), if recorded
    modules: dict[str, Any] | None = None
    # steps a run directory recorded (None for text inputs): a run that recorded none shows 0,
    # as its header does, not the MarkStep counter of its metrics report
    run_steps: int | None = None
    # torch_xla's eager mode: on at some step (None: not recorded), and the user's line that
    # turned it on ("file:line"), where the session saw the call
    eager_mode: bool | None = None
    eager_mode_site: str | None = None
    # The profiler capture of this part (a capture, or a run's trace window) with its device
    # model: per-step bottlenecks, device time per line, host tracing against device busy.
    trace: Trace | None = None
    # The capture's host time per step, where it has no device planes (tables.host_steps)
    host_activity: HostActivity | None = None
    # The user's source files the analyzers may read (the request's source roots; none by
    # default): findings quote their lines and read their loops from here, and nowhere else.
    sources: SourceFiles = field(default_factory=SourceFiles)

    _device: RunDevice | None = field(default=None, repr=False, compare=False)
    _device_made: bool = field(default=False, repr=False, compare=False)

    @property
    def device(self) -> RunDevice | None:
        """The run's executions attributed to its steps (``rundir.executions``): each step's
        time in the run, device busy time, queue wait and run-ahead; None where the run
        recorded no executions. Made once, on first use: every reader sees the same."""
        if not self._device_made:
            self._device = attribute(self.steps, self.execution_rows)
            self._device_made = True
        return self._device

    def first_steady_step(self) -> int:
        """The first step number after warm-up (``model.warmup``: the first ``warmup_steps``
        steps by position): over a run's recorded steps, else a capture's host steps, so a
        capture of steps 100 to 109 whose step 100 alone compiled has step 100 as its warm-up."""
        if self.steps:
            return first_steady_of_rows(self.steps, self.warmup_steps)
        if self.host_activity is not None:
            return first_steady_of(self.host_activity.steps, self.warmup_steps, "compile_ms")
        return first_steady_step((), self.warmup_steps)

    def step_times(self) -> list[float | None]:
        """Each step row's time in the run (the step model's: until its host and device work
        had both ended, ``rundir.executions``), where the run recorded its executions; else the
        host's boundary-to-boundary time (an older run). One per row, in row order."""
        device = self.device
        if device is None:
            return [row.wall_s for row in self.steps]
        return [ran.time_s if ran.time_s is not None else None for ran in device.steps]

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
        """Graphs compiled: whole graphs and, in eager mode, single ops (None: unknown)."""
        graphs = self.graph_compiles()
        eager = self.eager_compiles()
        if eager is None:
            return graphs
        return (graphs or 0) + eager

    def executions(self) -> int | None:
        """Graphs executed: whole graphs and, in eager mode, single ops (None: unknown)."""
        graphs = self.graph_executions()
        eager = self.eager_executions()
        if eager is None:
            return graphs
        return (graphs or 0) + eager

    def graph_compiles(self) -> int | None:
        if self.reports:
            value = self.metric_samples(*COMPILE_METRICS)
            if value is not None:
                return value
        if self.steps:
            return sum(s.compiles for s in self.steps)
        compilations = self.debug.compilations()
        return len(compilations) if compilations else None

    def graph_executions(self) -> int | None:
        if self.reports:
            value = self.metric_samples(*EXECUTE_METRICS)
            if value is not None:
                return value
        if self.steps:
            return sum(s.executions for s in self.steps)
        executions = self.debug.executions()
        return len(executions) if executions else None

    def eager_compiles(self) -> int | None:
        """Single ops compiled in eager mode (None: none recorded)."""
        if self.reports:
            value = self.metric_samples(*EAGER_COMPILE_METRICS)
            if value is not None:
                return value
        counts = [s.eager_compiles for s in self.steps if s.eager_compiles is not None]
        return sum(counts) if counts else None

    def eager_executions(self) -> int | None:
        """Single ops executed in eager mode (None: none recorded)."""
        if self.reports:
            value = self.metric_samples(*EAGER_EXECUTE_METRICS)
            if value is not None:
                return value
        counts = [s.eager_executions for s in self.steps if s.eager_executions is not None]
        return sum(counts) if counts else None

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
        if self.run_steps is not None:
            return self.run_steps
        if self.reports:
            return self.counters().get("MarkStep")
        return None


def input_from_run(run: Run, warmup_steps: int = 2) -> AnalysisInput:
    """Everything the analyzers read from one run directory."""
    data = AnalysisInput(
        reports=run.metrics_reports(),
        debug=run.debug_log(),
        steps=run.step_rows(),
        execution_rows=run.execution_rows(),
        warmup_steps=warmup_steps,
        regions=run.region_rows(),
        host_samples=run.host_sample_map(),
        cxx11_abi=run.info.cxx11_abi,
        graphs=run.graphs(),
        device_memory=run.info.device_memory,
        script=run.info.script,
        device_kind=run.info.device_kind,
        dynamo=parse_dynamo_records(run.dynamo_records()),
        modules=run.modules(),
        run_steps=run.steps_recorded,
        eager_mode=run.info.eager_mode,
        eager_mode_site=run.info.eager_mode_site,
    )
    _add_run_torch_traces(run, data)
    if data.eager_executions() and not any(s.eager is not None for s in data.steps):
        # Eager ops ran (the final report says so) but the rows do not split them per step
        # (an older xlaprof): each step's compile and device time is then not measured.
        for row in data.steps:
            row.eager = True
        data.eager_mode = True
    return data


# A TORCH_TRACE log a run keeps is read up to this size (inductor's logs hold its output code).
MAX_RUN_TORCH_TRACE_BYTES = 512 * 1024**2


def _add_run_torch_traces(run: Run, data: AnalysisInput) -> None:
    """The run's TORCH_TRACE logs (``xlaprof run`` sets TORCH_TRACE): their compiles, and their
    dynamo records where the session recorded none itself (``dynamo.jsonl`` has each record's
    step; the log does not)."""
    from xlaprof.errors import XlaprofError
    from xlaprof.parse.torch_trace import dynamo_records, read_torch_trace

    for path in run.torch_trace_files():
        try:
            data.torch_traces.append(read_torch_trace(path, MAX_RUN_TORCH_TRACE_BYTES))
        except XlaprofError as error:
            run.warn(f"TORCH_TRACE log not read: {error}")
    if data.torch_traces and not data.dynamo:
        data.dynamo = dynamo_records(data.torch_traces[0])
