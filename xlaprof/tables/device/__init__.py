"""The device model: per-device steps, busy and idle time, categories and top ops.

A capture is session -> host -> device. Devices are the planes a producer writes: TPU chips
(``XLA Modules``, ``XLA Ops``, ``Async XLA Ops``, ``Steps``, SparseCore lines), GPUs (one line
per stream, kernels and memcpys; ``Steps`` where the profiler derived it) and, in a capture with
no device planes (CPU PJRT), the host CPU itself, whose XLA ops carry ``hlo_op`` stats.

Everything here is a pure function of the event DataFrame (``xlaprof.load_trace``) and the
device table (``Trace.devices``); nothing reads files.

- **Steps are per device, never stitched across devices or hosts.** A device's steps come from
  its own ``Steps`` line; else from its host's step markers (``xlaprof.step``, ``StepMarker``);
  else, as XProf does, from its module executions (``XLA Modules``); else the device's whole
  capture is one window (``step`` is <NA>). ``step_source`` says which.
- **Busy** is the interval union of the device's compute events within the step: ``XLA Ops``
  and SparseCore ops on TPU minus XProf's off-duty categories (infeed, outfeed, host
  send/recv, megacore fusion), every stream event on GPU (kernels, memcpy, memset), the XLA ops
  of the CPU executor on a CPU capture. **Idle** is the rest of the step. Per-category seconds
  are the self time of the step's ops in that category (an op nested in another counts once,
  in its own category); on GPUs, where kernels overlap (on one stream as on several), they can
  add up to more than busy. GPU work that starts while its host compiles (``COMPILE_EVENTS``)
  is the compiler's autotuning, category ``autotune``, whatever the kernel.
- **Ops** are the compute events grouped by op: the HLO op (``hlo_op``, or on TPU the event
  metadata's display name), else the kernel name. Total time uses the device clock
  (``device_duration_ps``) where the event has it, as XProf's op statistics do; self time is
  total minus time in ops nested in it on the same line.

- **Host vs device** (``tracing_vs_device``): per host step, the busiest device's busy and idle
  time against what the host did: lazy tracing where the capture has torch_xla's runtime
  events, else the device's idle time, which the host made it wait (JAX, PyTorch eager).

GPU note: XProf counts only kernels attributed to an XLA op as busy, so runtime kernels such as
``__amd_rocclr_copyBuffer`` are idle time to XProf and busy (``copy``) here; ``device_ops``
says which rows are attributed (``hlo_op`` present).

The modules, in the order the computation runs: ``events`` (which events are compute, their op,
category and times; ``categories`` names the categories), ``steps`` (per-device steps, busy,
idle, utilization), ``ops`` (per-op totals and rates), ``tracing`` (host against device) and
``summary`` (one host reduced to a ``DeviceSummary``, several merged). Interval arithmetic is in
``xlaprof.tables.intervals``; line and event names in ``xlaprof.parse.events``.
"""

from xlaprof.tables.device.categories import CATEGORIES, categorize
from xlaprof.tables.device.events import device_events
from xlaprof.tables.device.ops import OP_COLUMNS, add_rates, device_ops, top_ops
from xlaprof.tables.device.steps import (
    STEP_COLUMNS,
    UTILIZATION_COLUMNS,
    device_steps,
    device_utilization,
)
from xlaprof.tables.device.summary import merge_summaries, summarize_host
from xlaprof.tables.device.tracing import (
    HOST_BOUND_RATIO,
    TRACING_BOUND_RATIO,
    TRACING_COLUMNS,
    has_lazy_tensor_runtime,
    tracing_vs_device,
)

__all__ = [
    "CATEGORIES",
    "HOST_BOUND_RATIO",
    "OP_COLUMNS",
    "STEP_COLUMNS",
    "TRACING_BOUND_RATIO",
    "TRACING_COLUMNS",
    "UTILIZATION_COLUMNS",
    "add_rates",
    "categorize",
    "device_events",
    "device_ops",
    "device_steps",
    "device_utilization",
    "has_lazy_tensor_runtime",
    "merge_summaries",
    "summarize_host",
    "top_ops",
    "tracing_vs_device",
]
