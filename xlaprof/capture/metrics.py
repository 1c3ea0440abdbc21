"""Per-step metric deltas: the runtime's cumulative metrics and counters, read at each boundary.

torch_xla keeps cumulative metrics (count and accumulated nanoseconds) and counters; a step's
share is the difference between two reads. A read costs a few microseconds per metric.
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
    "LazyTracing": (None, "tracing_s"),
}
GRAPH_SIZE = "TensorsGraphSize"


class StepMetrics:
    """Reads the runtime's metrics through ``torch_xla._XLAC`` and fills a ``StepRow``'s deltas."""

    def __init__(self, xlac: Any) -> None:
        self.xlac = xlac
        self.previous: dict[str, tuple[int, float]] = {}
        self.previous_aten: dict[str, int] = {}
        self.previous_ops = 0

    def metric(self, name: str) -> tuple[int, float]:
        """(samples, accumulator) of one metric; (0, 0.0) before its first sample."""
        data = self.xlac._xla_metric_data(name)
        if data is None:
            return 0, 0.0
        return int(data[0]), float(data[1])

    def op_counters(self) -> tuple[dict[str, int], int]:
        """``aten::`` counters (CPU fallbacks), and the total of ``xla::`` (lowered op) calls."""
        aten, lowered = {}, 0
        for name in self.xlac._xla_counter_names():
            if name.startswith("aten::"):
                aten[name] = int(self.xlac._xla_counter_value(name) or 0)
            elif name.startswith("xla::"):
                lowered += int(self.xlac._xla_counter_value(name) or 0)
        return aten, lowered

    def snapshot(self) -> None:
        """Take the current values as the start of the next step."""
        for name in (*TIME_METRICS, GRAPH_SIZE):
            self.previous[name] = self.metric(name)
        self.previous_aten, self.previous_ops = self.op_counters()

    def idle(self, graph_required: bool = False) -> bool:
        """True when no graph was built since the last read and, unless ``graph_required``,
        nothing was traced either (an op can run without a graph of its own: a compiled
        dynamo program, a host read).

        A sync then ran no graph: ``MpDeviceLoader`` syncs before its first batch, after the
        last one and when nothing is pending, and such syncs do not end a training step.
        """
        graphs = self.metric(GRAPH_SIZE)[0]
        if graphs != self.previous.get(GRAPH_SIZE, (0, 0))[0]:
            return False
        if graph_required:
            return True
        _aten, lowered = self.op_counters()
        return lowered == self.previous_ops

    def fill(self, row: StepRow) -> None:
        """Set ``row``'s counts and seconds to what happened since the last read."""
        for name, (count_field, seconds_field) in TIME_METRICS.items():
            samples, accumulator = self.metric(name)
            before_samples, before_accumulator = self.previous.get(name, (0, 0.0))
            if count_field is not None:
                setattr(row, count_field, samples - before_samples)
            setattr(row, seconds_field, (accumulator - before_accumulator) / 1e9)
            self.previous[name] = (samples, accumulator)
        samples, accumulator = self.metric(GRAPH_SIZE)
        before_samples, before_accumulator = self.previous.get(GRAPH_SIZE, (0, 0.0))
        if samples > before_samples:
            row.graph_nodes = (accumulator - before_accumulator) / (samples - before_samples)
        self.previous[GRAPH_SIZE] = (samples, accumulator)
        aten, lowered = self.op_counters()
        row.ops = lowered - self.previous_ops
        self.previous_ops = lowered
        row.aten = {
            k: v - self.previous_aten.get(k, 0)
            for k, v in aten.items()
            if v != self.previous_aten.get(k, 0)
        }
        self.previous_aten = aten
