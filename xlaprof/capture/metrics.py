"""Per-step metric deltas: the runtime's cumulative metrics and counters, read at each boundary.

torch_xla keeps cumulative metrics (count and accumulated nanoseconds) and counters; a step's
share is the difference between two reads. Each read is a call into ``torch_xla._XLAC`` that
can cost from a few to tens of microseconds on the stepping thread while the device executes,
so a boundary reads each value once: ``idle`` reads the two it needs (graph size, tracing) and
``take`` reuses them. Lowered ops are counted from ``LazyTracing``'s sample count: torch_xla
records one ``LazyTracing`` sample with every ``xla::`` counter increment (both come from the
same macro, ``TORCH_LAZY_FN_COUNTER_TIMED_TRACING``), so one metric read replaces summing
dozens of ``xla::`` counters; only the ``aten::`` counters (CPU fallbacks) are read one by one.

In eager mode (``torch_xla.experimental.eager_mode(True)``) every op is compiled and executed as
its own graph, and torch_xla records those in ``EagerOpCompileTime`` and ``EagerOpExecuteTime``,
not in ``CompileTime``/``ExecuteTime`` (checked on torch_xla 2.9: the two pairs add up to the
``UncachedCompile`` and ``ExecuteComputation`` counters). They are read once eager mode has been
seen on at a boundary, so a run that never uses it pays nothing for them.
"""

from __future__ import annotations

from typing import Any

from xlaprof.rundir.schema import StepRow

# metric name -> (count field, seconds field) of StepRow; time accumulators are nanoseconds.
TIME_METRICS = {
    "CompileTime": ("compiles", "compile_s"),
    "ExecuteTime": ("executions", "execute_s"),
    "TransferToDeviceTime": ("transfers_to_device", "to_device_s"),
    "TransferFromDeviceTime": ("transfers_from_device", "from_device_s"),
    "LazyTracing": ("ops", "tracing_s"),
    "EagerOpCompileTime": ("eager_compiles", "eager_compile_s"),
    "EagerOpExecuteTime": ("eager_executions", "eager_execute_s"),
}
EAGER_METRICS = ("EagerOpCompileTime", "EagerOpExecuteTime")
GRAPH_SIZE = "TensorsGraphSize"
# torch_xla keeps each metric's last N samples (default 1024) and converts all of them to Python
# tuples on every read: ~70-150 us for a full ``LazyTracing`` per step, ~9 us with 64. The
# session reads deltas of the accumulators, and ``ExecuteTime``'s samples of the executions
# completed since its last read. A drain the script waits for itself (``wait_device_ops``, a
# ``.item()``) completes the whole queue between two reads, and torch_xla lets about 32
# executions wait (measured on the CPU runtime), so the window holds twice that: with 32, a
# 40-step device-bound run lost one sample in each of 3 runs; 64 costs the boundary's six reads
# ~6 us more. The window is also what the final metrics report's percentiles cover. torch_xla
# reads the variable when it is imported: ``xlaprof run`` sets it before the job starts;
# ``profile()`` after an import of torch_xla cannot (the reads then cost more, nothing else
# changes).
METRICS_SAMPLES = "64"
TRACING = "LazyTracing"
_FALLBACK_PREFIX = "aten::"


# The metrics a boundary reads, in the order of a ``Reading``: the two ``idle`` needs first.
READ_ORDER = (
    GRAPH_SIZE,
    TRACING,
    "CompileTime",
    "ExecuteTime",
    "TransferToDeviceTime",
    "TransferFromDeviceTime",
    *EAGER_METRICS,  # read only once eager mode was seen on (``StepMetrics.eager_seen``)
)
_COMPILES = READ_ORDER.index("CompileTime")
_EXECUTE = READ_ORDER.index("ExecuteTime")
_EAGER = READ_ORDER.index(EAGER_METRICS[0])
# A boundary's raw values: (samples, accumulator) of each metric in READ_ORDER.
Reading = tuple[tuple[int, float], ...]
# One execution as ``ExecuteTime`` recorded it: (completion, launch to completion). torch_xla
# records the sample when the execution completes (its timestamp: Unix seconds) and its value
# is the time since the execution was launched, queue included (nanoseconds): checked on torch
# 2.9 / torch_xla 2.9 against the moment ``wait_device_ops()`` returned (0.1 ms).
Sample = tuple[float, float]
# Executions whose samples torch_xla's window dropped before a read: (how many, the completion
# of the first sample that read kept, which they completed before; None: it kept none).
Lost = tuple[int, float | None]


class StepMetrics:
    """Reads the runtime's metrics through ``torch_xla._XLAC``; turns readings into step deltas.

    The boundary only reads (``idle``, ``take``): the values it needs at once (whether a graph
    ran, how many compiled) are compared there, and the rest of the work (deltas, the row) is
    done by ``row`` when rows are written, about once a second, in a loop over the steps kept
    since. Python right after a step runs several times slower than the same code warm (the
    step's work has filled the caches): measured on the 2-core CPU runtime (2026-11-24,
    thread CPU per step), moving the row out of the boundary took it from ~160 to ~90 us on a
    device-bound loop and from ~185 to ~110 us on a tiny-op loop; building the rows in the
    batch costs 3-8 us a step.
    """

    def __init__(self, xlac: Any) -> None:
        self.xlac = xlac
        self._metric_data = xlac._xla_metric_data
        self.last: Reading = ((0, 0.0),) * len(READ_ORDER)  # read at the last boundary
        self._head: Reading | None = None  # what ``idle`` read at this boundary
        # The reading and ``aten::`` counters the next ``row`` takes its deltas from.
        self._row_base: Reading = self.last
        self._row_base_aten: dict[str, int] = {}
        # ExecuteTime's samples read since ``take_executions`` was last called, and the
        # executions that completed with their sample no longer in torch_xla's window (more
        # than ``METRICS_SAMPLES`` completed between two reads): per read, how many, and the
        # completion of the first sample kept after them (executions complete in launch
        # order, so the lost ones are the read's earliest: this places them in the run)
        self._completed: list[Sample] = []
        self._lost: list[Lost] = []
        get = getattr(xlac, "_get_use_eager_mode", None)
        self._eager_mode = get if callable(get) else None
        self.eager_seen = False  # eager mode on at some boundary (or at the snapshot)

    def eager_mode(self) -> bool | None:
        """Whether torch_xla's eager mode is on now (None: this torch_xla cannot say)."""
        if self._eager_mode is None:
            return None
        try:
            on = bool(self._eager_mode())
        except Exception:
            return None
        self.eager_seen = self.eager_seen or on
        return on

    def metric(self, name: str) -> tuple[int, float]:
        """(samples, accumulator) of one metric; (0, 0.0) before its first sample."""
        data = self._metric_data(name)
        if data is None:
            return 0, 0.0
        return int(data[0]), float(data[1])

    def fallback_counters(self) -> dict[str, int]:
        """The ``aten::`` counters: ops that ran on the CPU instead of being lowered."""
        counter = self.xlac._xla_counter_value
        return {
            name: int(counter(name) or 0)
            for name in self.xlac._xla_counter_names()
            if name.startswith(_FALLBACK_PREFIX)
        }

    def snapshot(self) -> None:
        """Take the current values as the start of the next step."""
        self._head = None
        self.eager_mode()
        self.last = self._row_base = tuple(self.metric(name) for name in READ_ORDER)
        self._row_base_aten = self.fallback_counters()
        self._completed, self._lost = [], []

    def _executions(self, before: int) -> tuple[int, float]:
        """``ExecuteTime``'s (samples, accumulator), keeping the samples of the executions that
        completed since the last read (``before`` of them then): torch_xla hands over its
        window of recent samples with every read, so this costs a slice, no second call."""
        data = self._metric_data("ExecuteTime")
        if data is None:
            return 0, 0.0
        count = int(data[0])
        new = count - before
        if new > 0:
            window = data[2]
            kept = min(new, len(window))
            first = len(window) - kept
            self._completed.extend(window[first:])
            if new > kept:
                self._lost.append((new - kept, float(window[first][0]) if kept else None))
        return count, float(data[1])

    def take_executions(self) -> tuple[list[Sample], list[Lost]]:
        """The executions that completed since the last call (their ``ExecuteTime`` samples,
        in completion order) and those that completed with their samples lost (per read: how
        many, and the completion of the sample kept right after them)."""
        completed, lost = self._completed, self._lost
        self._completed, self._lost = [], []
        return completed, lost

    def poll_executions(self) -> None:
        """Read ``ExecuteTime`` once more, keeping the executions completed since the last read
        (the drain at the end of a run: no step boundary reads them)."""
        before = self.last[_EXECUTE][0]
        count, total = self._executions(before)
        if count != before:
            last = list(self.last)
            last[_EXECUTE] = (count, total)
            self.last = tuple(last)

    def idle(self, graph_required: bool = False) -> bool:
        """True when no graph was built since the last read and, unless ``graph_required``,
        nothing was traced either (an op can run without a graph of its own: a compiled
        dynamo program, a host read).

        A sync then ran no graph: ``MpDeviceLoader`` syncs before its first batch, after the
        last one and when nothing is pending, and such syncs do not end a training step.
        """
        head = self._head = (self.metric(GRAPH_SIZE), self.metric(TRACING))
        if head[0][0] != self.last[0][0]:
            return False
        return graph_required or head[1][0] == self.last[1][0]

    def take(self, fallbacks: bool = True) -> tuple[Reading, dict[str, int] | None, int]:
        """This boundary's reading, the ``aten::`` counters (None when not asked: none
        changed) and the number of graphs compiled since the last boundary.

        ``fallbacks=False`` skips reading the ``aten::`` counters: the session passes it when
        the fallback tracker is on and its log did not grow, as the tracker writes a record for
        every counted fallback (checked on torch_xla 2.9, ``.item()``'s
        ``aten::_local_scalar_dense`` included).
        """
        head = self._head or (self.metric(GRAPH_SIZE), self.metric(TRACING))
        self._head = None
        middle = (
            self._executions(self.last[_EXECUTE][0]) if name == "ExecuteTime" else self.metric(name)
            for name in READ_ORDER[2:_EAGER]
        )
        if self.eager_seen:
            eager = tuple(self.metric(name) for name in EAGER_METRICS)
        else:
            eager = self.last[_EAGER:]
        reading = (*head, *middle, *eager)
        compiles = reading[_COMPILES][0] - self.last[_COMPILES][0]
        self.last = reading
        return reading, (self.fallback_counters() if fallbacks else None), compiles

    def row(
        self,
        row: StepRow,
        reading: Reading,
        aten: dict[str, int] | None,
        eager_read: bool = True,
    ) -> StepRow:
        """Set ``row``'s counts and seconds to what happened between the previous reading
        given to ``row`` (or the snapshot) and ``reading``. Called once per reading, in order.
        ``eager_read`` says whether the eager-op metrics were read for it; if not, the row's
        eager fields stay None (not measured: eager mode was never on)."""
        base, self._row_base = self._row_base, reading
        (graphs, nodes), (graphs_before, nodes_before) = reading[0], base[0]  # GRAPH_SIZE
        row.graphs = graphs - graphs_before
        if graphs > graphs_before:
            row.graph_nodes = (nodes - nodes_before) / (graphs - graphs_before)
        for name, after, before in zip(READ_ORDER[1:], reading[1:], base[1:], strict=True):
            if name in EAGER_METRICS and not eager_read:
                continue
            count_field, seconds_field = TIME_METRICS[name]
            setattr(row, count_field, after[0] - before[0])
            setattr(row, seconds_field, (after[1] - before[1]) / 1e9)
        if aten is None:
            row.aten = {}
            return row
        previous = self._row_base_aten
        row.aten = {k: v - previous.get(k, 0) for k, v in aten.items() if v != previous.get(k, 0)}
        self._row_base_aten = aten
        return row
