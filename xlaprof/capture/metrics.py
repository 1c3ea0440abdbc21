"""Per-step metric deltas: the runtime's cumulative metrics and counters, read at each boundary.

torch_xla keeps cumulative metrics (count and accumulated nanoseconds) and counters; a step's
share is the difference between two reads. Each read is a call into ``torch_xla._XLAC`` that
can cost from a few to tens of microseconds on the stepping thread while the device executes,
so a boundary reads each value once: ``idle`` reads the two it needs (graph size, tracing) and
``fill`` reuses them. Lowered ops are counted from ``LazyTracing``'s sample count: torch_xla
records one ``LazyTracing`` sample with every ``xla::`` counter increment (both come from the
same macro, ``TORCH_LAZY_FN_COUNTER_TIMED_TRACING``), so one metric read replaces summing
dozens of ``xla::`` counters; only the ``aten::`` counters (CPU fallbacks) are read one by one.
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
}
GRAPH_SIZE = "TensorsGraphSize"
# torch_xla keeps each metric's last N samples (default 1024) and converts all of them to Python
# tuples on every read: ~70-150 us for a full ``LazyTracing`` per step, ~9 us with 64. The
# session reads deltas of the accumulators only, so a short window is enough (it also sets the
# window the final metrics report's percentiles cover). torch_xla reads the variable when it is
# imported: ``xlaprof run`` sets it before the job starts; ``profile()`` after an import of
# torch_xla cannot (the reads then cost more, nothing else changes).
METRICS_SAMPLES = "32"
TRACING = "LazyTracing"
_FALLBACK_PREFIX = "aten::"


class StepMetrics:
    """Reads the runtime's metrics through ``torch_xla._XLAC`` and fills a ``StepRow``'s deltas."""

    def __init__(self, xlac: Any) -> None:
        self.xlac = xlac
        self.previous: dict[str, tuple[int, float]] = {}
        self.previous_aten: dict[str, int] = {}
        # Values read by ``idle`` at this boundary, reused by ``fill`` (never across boundaries).
        self._fresh: dict[str, tuple[int, float]] = {}

    def metric(self, name: str) -> tuple[int, float]:
        """(samples, accumulator) of one metric; (0, 0.0) before its first sample."""
        data = self.xlac._xla_metric_data(name)
        if data is None:
            return 0, 0.0
        return int(data[0]), float(data[1])

    def _current(self, name: str) -> tuple[int, float]:
        """This boundary's value of ``name``: read once, then reused."""
        value = self._fresh.get(name)
        if value is None:
            value = self._fresh[name] = self.metric(name)
        return value

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
        self._fresh = {}
        for name in (*TIME_METRICS, GRAPH_SIZE):
            self.previous[name] = self.metric(name)
        self.previous_aten = self.fallback_counters()

    def idle(self, graph_required: bool = False) -> bool:
        """True when no graph was built since the last read and, unless ``graph_required``,
        nothing was traced either (an op can run without a graph of its own: a compiled
        dynamo program, a host read).

        A sync then ran no graph: ``MpDeviceLoader`` syncs before its first batch, after the
        last one and when nothing is pending, and such syncs do not end a training step.
        """
        self._fresh = {}
        graphs = self._current(GRAPH_SIZE)[0]
        if graphs != self.previous.get(GRAPH_SIZE, (0, 0.0))[0]:
            return False
        if graph_required:
            return True
        return self._current(TRACING)[0] == self.previous.get(TRACING, (0, 0.0))[0]

    def fill(self, row: StepRow, fallbacks: bool = True) -> None:
        """Set ``row``'s counts and seconds to what happened since the last read.

        ``fallbacks=False`` skips reading the ``aten::`` counters (none changed): the session
        passes it when the fallback tracker is on and its log did not grow, as the tracker
        writes a record for every counted fallback (checked on torch_xla 2.9, ``.item()``'s
        ``aten::_local_scalar_dense`` included).
        """
        for name, (count_field, seconds_field) in TIME_METRICS.items():
            samples, accumulator = self._current(name)
            before_samples, before_accumulator = self.previous.get(name, (0, 0.0))
            setattr(row, count_field, samples - before_samples)
            setattr(row, seconds_field, (accumulator - before_accumulator) / 1e9)
            self.previous[name] = (samples, accumulator)
        samples, accumulator = self._current(GRAPH_SIZE)
        before_samples, before_accumulator = self.previous.get(GRAPH_SIZE, (0, 0.0))
        if samples > before_samples:
            row.graph_nodes = (accumulator - before_accumulator) / (samples - before_samples)
        self.previous[GRAPH_SIZE] = (samples, accumulator)
        self._fresh = {}
        if not fallbacks:
            row.aten = {}
            return
        aten = self.fallback_counters()
        row.aten = {
            k: v - self.previous_aten.get(k, 0)
            for k, v in aten.items()
            if v != self.previous_aten.get(k, 0)
        }
        self.previous_aten = aten
