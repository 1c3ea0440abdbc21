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

Longer than the ~350 lines a module here aims for: the device model is one computation
(compute events, intervals, steps, categories, ops, per-host summary) whose stages share private
columns and interval helpers; split by stage, each part would have to export those internals.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xlaprof.analysis import columns as cols

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

CATEGORIES = (
    "matmul_conv",
    "fusion",
    "collective",
    "copy",
    "infeed_outfeed",
    "host_offload",
    "autotune",
    "other",
)
# XProf's off-duty HLO categories (tsl::profiler::IsOffDutyOp): waiting on the host, not busy.
OFF_DUTY_CATEGORIES = frozenset(
    {
        "infeed",
        "outfeed",
        "host send",
        "host send-done",
        "host recv",
        "host recv-done",
        "megacore fusion",
    }
)
# Lines a profiler derives from other lines: never compute (their events duplicate stream work).
DERIVED_LINES = frozenset(
    {
        "Steps",
        "XLA Modules",
        "XLA TraceMe",
        "Overlay",
        "Async XLA Ops",
        "TensorFlow Ops",
        "TensorFlow Name Scope",
        "Framework Ops",
        "Framework Name Scope",
        "Source code",
        "Launch Stats",
        "SparseCore Modules",
        "SparseCore Steps",
    }
)
TPU_OP_LINES = frozenset({"XLA Ops", "SparseCore Ops"})
STEPS_LINE = "Steps"
MODULES_LINE = "XLA Modules"
# Kineto categories on GPU planes that annotate rather than execute.
_ANNOTATION_CATS = frozenset({"gpu_user_annotation", "user_annotation"})
# TPU memory space 5 is host memory: a copy to or from S(5) is a host-offload transfer.
_HOST_MEMORY_SPACE = "S(5)"
# Host events of the lazy-tensor runtime that are not Python/tracing time within a host step.
_HOST_RUNTIME_EVENTS = (
    "SyncTensorsGraphInternal",
    "XLAGraphExecutor::Compile",
    "TransferToDevice",
    "TransferFromDevice",
    "WaitDeviceOps",
    "PjRtComputationClient::ExecuteComputation",
    "ThunkExecutor::Execute",
)
# Host events only the lazy-tensor runtime (torch_xla) records. A host without any has no lazy
# tracing to measure (JAX, PyTorch eager): its host time is whatever the host did.
LAZY_TENSOR_EVENTS = (
    "StepMarker",
    "SyncTensorsGraph",
    "SyncTensorsGraphInternal",
    "XLAGraphExecutor::Compile",
    "ExtractIRAndPrepareXlaData_",
    "PjRtComputationClient::ExecuteComputation",
)
# Host events that span a compilation: the PJRT C API's compile call (JAX, any PJRT plugin),
# JAX's own span around it, torch_xla's compile. GPU work that starts inside one is the
# compiler's autotuning (candidate kernels timed, redzone checks), not the program's.
COMPILE_EVENTS = (
    "PJRT_Client_Compile",
    "backend_compile_and_load",
    "backend_compile",
    "XLAGraphExecutor::Compile",
)
# A step is called tracing-bound when host tracing takes at least this share of device busy.
TRACING_BOUND_RATIO = 1.0
# Without lazy-tensor events, a step is host-bound when the device idles in it at least this
# multiple of its busy time (idle >= busy: the device waits on the host half the step or more).
HOST_BOUND_RATIO = 1.0

STEP_COLUMNS = [
    "session",
    "host",
    "device",
    "kind",
    "step",
    "step_source",
    "start_ns",
    "end_ns",
    "wall_s",
    "busy_s",
    "idle_s",
    "duty",
    *[f"{name}_s" for name in CATEGORIES],
]
OP_COLUMNS = [
    "session",
    "host",
    "device",
    "kind",
    "name",
    "category",
    "hlo_category",
    "program_id",
    "hlo_module",
    "occurrences",
    "total_s",
    "self_s",
    "flops",
    "bytes_accessed",
    "flops_per_s",
    "bytes_per_s",
    "intensity",
    "bound",
]
UTILIZATION_COLUMNS = [
    "session",
    "host",
    "device",
    "kind",
    "span_s",
    "busy_s",
    "idle_s",
    "duty",
    "steps",
    "step_source",
    *[f"{name}_s" for name in CATEGORIES],
]
TRACING_COLUMNS = [
    "session",
    "host",
    "step",
    "host_wall_s",
    "tracing_s",
    "device_busy_s",
    "ratio",
    "tracing_bound",
    "device_idle_s",
    "lazy_tensor",
    "bound",
]


# ---------------------------------------------------------------- categories


def categorize(hlo_category: str | None, name: str, kineto_cat: str | None = None) -> str:
    """One of ``CATEGORIES`` for an op, from its XLA category where known, else its name."""
    text = name.lower()
    if hlo_category:
        category = hlo_category.lower()
        if "infeed" in category or "outfeed" in category:
            return "infeed_outfeed"
        if category.startswith(("host send", "host recv")):
            return "host_offload"
        if category.startswith("copy") and _HOST_MEMORY_SPACE in name:
            return "host_offload"
        if category.startswith(("all-", "reduce-scatter", "collective", "send", "recv")):
            return "collective"
        if "megascale" in category or "all-reduce" in category:
            return "collective"
        if "convolution" in category or category in ("dot", "output fusion", "gemm"):
            return "matmul_conv"
        if category.startswith("copy") or category in (
            "data formatting",
            "dynamic-update-slice",
            "dynamic-slice",
            "transpose",
        ):
            return "copy"
        if "fusion" in category:
            return "fusion"
        return "other"
    if kineto_cat == "gpu_memset":
        return "copy"
    if kineto_cat == "gpu_memcpy" or "memcpy" in text:
        # Kineto: "Memcpy HtoD (Pageable -> Device)"; XSpace (CUPTI via XLA): "MemcpyH2D"
        between_host_and_device = ("htod", "dtoh", "htoh", "h2d", "d2h", "h2h")
        return "host_offload" if any(k in text for k in between_host_and_device) else "copy"
    if any(k in text for k in ("nccl", "rccl", "all-reduce", "allreduce", "all-gather")):
        return "collective"
    if any(k in text for k in ("reduce-scatter", "reducescatter", "all-to-all", "alltoall")):
        return "collective"
    if any(
        k in text for k in ("gemm", "cijk_", "cublas", "cutlass", "matmul", "dot", "conv", "cudnn")
    ) or any(k in text for k in ("im2col", "im3d2col", "fmha", "flash", "fused_attn")):
        return "matmul_conv"
    if any(k in text for k in ("copybuffer", "memset", "fillbuffer", "copy")):
        return "copy"
    if "fusion" in text:
        return "fusion"
    return "other"


# ---------------------------------------------------------------- compute events


def device_events(events: pd.DataFrame) -> pd.DataFrame:
    """Each device's events, with ``compute`` (counts as busy), ``op`` and ``category``.

    Device planes as they are; for a host whose capture has no device plane with events, the
    host plane's events that carry an ``hlo_op`` (the CPU executor's XLA ops) as device ``CPU``.
    """
    import numpy as np

    # Categorical comparisons and per-category lookups: astype(str) on every event is slow.
    on_device = (events["plane_kind"] == "device").to_numpy()
    hosts_with_devices = set(events.loc[on_device, "host"].astype(str).unique())
    host_rows = (events["plane_kind"] == "host").to_numpy() & ~events["host"].isin(
        hosts_with_devices
    ).to_numpy()
    cpu_ops = host_rows & events["hlo_op"].notna().to_numpy()
    frame = events[on_device | cpu_ops].copy()
    host_plane = (frame["plane_kind"] == "host").to_numpy()
    devices = np.array(frame["device"].astype(object).to_numpy(), dtype=object)
    devices[host_plane] = "CPU"
    frame["device"] = devices
    kind_of = {d: str(d).split(":", 1)[0].upper() for d in set(devices)}
    frame["kind"] = [kind_of[d] for d in devices]
    line = frame["line"].astype(object)
    kind = frame["kind"].to_numpy()
    hlo_category = frame["hlo_category"].astype(object)
    cat = frame["args"].map(lambda a: a.get("cat") if isinstance(a, dict) else None)
    tpu = kind == "TPU"
    op_lines = line.isin(TPU_OP_LINES).to_numpy()
    compute = np.where(
        tpu,
        op_lines & ~hlo_category.isin(OFF_DUTY_CATEGORIES).to_numpy(),
        ~line.isin(DERIVED_LINES).to_numpy() & ~cat.isin(_ANNOTATION_CATS).to_numpy(),
    )
    frame["compute"] = compute
    frame["op_line"] = np.where(tpu, op_lines, compute)
    names = frame["name"].astype(object)
    op = frame["hlo_op"].astype(object)
    frame["op"] = op.where(op.notna(), names)
    # TPU ops are categorized by their HLO category and text (the memory space of a copy is
    # in the shapes of the event name); GPU kernels by their op or kernel name.
    text = names.where(hlo_category.notna(), frame["op"])
    keys = list(zip(hlo_category.where(hlo_category.notna(), None), text, cat, strict=True))
    labels = {key: categorize(key[0], str(key[1]), key[2]) for key in set(keys)}
    frame["category"] = [labels[key] for key in keys]
    frame.loc[_while_compiling(events, frame), "category"] = "autotune"
    frame["time_ns"], frame["self_ns"] = _op_times(frame)
    return frame


def _while_compiling(events: pd.DataFrame, frame: pd.DataFrame) -> np.ndarray:
    """Which GPU compute events start while their host compiles (``COMPILE_EVENTS``).

    XLA's GPU compiler runs kernels of its own while it compiles: candidate fusions and
    cuBLAS/cuDNN algorithms it times, redzone checks around them, delay kernels. They are
    device work (busy), but not the program's: they get the category ``autotune``.
    """
    import numpy as np

    chosen = np.zeros(len(frame), dtype=bool)
    gpu = frame["compute"].to_numpy() & (frame["kind"].to_numpy() == "GPU")
    if not gpu.any():
        return chosen
    compiles = events[
        cols.equals(events["plane_kind"], "host") & cols.member(events["name"], COMPILE_EVENTS)
    ]
    if compiles.empty:
        return chosen
    starts = frame["start_ns"].to_numpy()
    for (session, host), spans in compiles.groupby(["session", "host"], observed=True):
        mine = gpu & cols.equals(frame["session"], session) & cols.equals(frame["host"], host)
        if not mine.any():
            continue
        covered = Coverage.of(spans["start_ns"].to_numpy(), spans["end_ns"].to_numpy())
        at = starts[mine]
        # an event starts inside a compile span when the covered length grows right after it
        inside = covered.within(at, at + 1) > 0
        chosen[np.flatnonzero(mine)[inside]] = True
    return chosen


def _op_times(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each op-line event's time (device clock where known) and self time, in ns (NaN off ops).

    Self time is the time not spent in ops nested inside, on the same line: on TPUs nesting is
    read on the device clock (``device_offset_ps``), where ops never overlap (XProf does the
    same); converted host-clock timestamps can overlap by a few ns.
    """
    import numpy as np

    time_ns = np.full(len(frame), np.nan)
    self_ns = np.full(len(frame), np.nan)
    ops = np.flatnonzero(frame["op_line"].to_numpy())
    if not len(ops):
        return time_ns, self_ns
    on_device = frame["device_duration_ps"].to_numpy()[ops]
    starts = frame["start_ns"].to_numpy()[ops]
    wall = frame["end_ns"].to_numpy()[ops] - starts
    times = np.where(np.isnan(on_device), wall, on_device / 1000.0)
    offsets = frame["device_offset_ps"].to_numpy()[ops]
    mine = frame.iloc[ops]
    # One group per (session, host, device, line), found from the categorical codes.
    groups = mine.groupby(["session", "host", "device", "line"], observed=True, sort=False)
    own = np.empty(len(ops))
    for index in groups.indices.values():
        if not np.isnan(offsets[index]).any():
            begin = offsets[index].astype(np.int64)
            end = begin + (times[index] * 1000.0).astype(np.int64)
            own[index] = self_times_ns(begin, end) / 1000.0
        else:
            begin = starts[index] - starts[index].min()
            end = begin + times[index].astype(np.int64)
            own[index] = self_times_ns(begin, end)
    time_ns[ops] = times
    self_ns[ops] = own
    return time_ns, self_ns


# ---------------------------------------------------------------- interval arithmetic


@dataclass
class Coverage:
    """A union of intervals, answering "how much of [a, b) is covered" for many windows."""

    starts: np.ndarray
    ends: np.ndarray
    before: np.ndarray  # covered length before each block

    @classmethod
    def of(cls, starts: np.ndarray, ends: np.ndarray) -> Coverage:
        import numpy as np

        if len(starts) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return cls(empty, empty, empty)
        order = np.argsort(starts, kind="stable")
        s, e = starts[order], ends[order]
        reach = np.maximum.accumulate(e)
        new = np.concatenate([[True], s[1:] > reach[:-1]])
        first = np.flatnonzero(new)
        last = np.concatenate([first[1:] - 1, [len(s) - 1]])
        block_starts, block_ends = s[first], reach[last]
        lengths = block_ends - block_starts
        before = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        return cls(block_starts, block_ends, before)

    def upto(self, t: np.ndarray) -> np.ndarray:
        """Covered length in (-inf, t) for each t."""
        import numpy as np

        if len(self.starts) == 0:
            return np.zeros(len(t), dtype=np.int64)
        i = np.searchsorted(self.starts, t, side="right") - 1
        safe = np.maximum(i, 0)
        partial = np.clip(t - self.starts[safe], 0, self.ends[safe] - self.starts[safe])
        return np.where(i >= 0, self.before[safe] + partial, 0)

    def within(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.upto(b) - self.upto(a)

    @property
    def total(self) -> int:
        return int((self.ends - self.starts).sum())


def self_times_ns(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Duration minus the time of events nested inside (one line's events, any order)."""
    import numpy as np

    order = np.lexsort((-ends, starts))
    own = (ends - starts).astype(np.float64)
    stack: list[int] = []
    s_list, e_list = starts.tolist(), ends.tolist()
    for index in order.tolist():
        start, end = s_list[index], e_list[index]
        while stack and e_list[stack[-1]] <= start:
            stack.pop()
        if stack and end <= e_list[stack[-1]]:
            own[stack[-1]] -= end - start
        stack.append(index)
    return own


# ---------------------------------------------------------------- steps


def step_windows(
    events: pd.DataFrame, frame: pd.DataFrame, host_bounds: pd.DataFrame | None
) -> pd.DataFrame:
    """Each device's step windows: session, host, device, kind, step, step_source, start, end.

    ``frame`` is ``device_events(events)``; ``host_bounds`` the host step bounds
    (``Trace.step_bounds``: session?, host, step, start_ns, end_ns).
    """
    import pandas as pd

    rows: list[tuple[Any, ...]] = []
    for (session, host, device), group in frame.groupby(
        ["session", "host", "device"], observed=True, sort=True
    ):
        kind = str(group["kind"].iloc[0])
        steps_line = group[cols.equals(group["line"], STEPS_LINE)]
        if len(steps_line):
            numbers = _step_numbers(steps_line)
            for number, start, end in zip(
                numbers, steps_line["start_ns"], steps_line["end_ns"], strict=True
            ):
                rows.append((session, host, device, kind, number, "Steps line", start, end))
            continue
        mine = _host_bounds_of(host_bounds, session, host)
        if mine is not None and len(mine):
            for row in mine.itertuples(index=False):
                rows.append(
                    (session, host, device, kind, row.step, "host steps", row.start_ns, row.end_ns)
                )
            continue
        modules = group[cols.equals(group["line"], MODULES_LINE)].sort_values("start_ns")
        if len(modules):
            for number, (start, end) in enumerate(
                zip(modules["start_ns"], modules["end_ns"], strict=True)
            ):
                rows.append((session, host, device, kind, number, "module executions", start, end))
            continue
        compute = group[group["compute"]]
        if len(compute):
            rows.append(
                (
                    session,
                    host,
                    device,
                    kind,
                    None,
                    "whole capture",
                    compute["start_ns"].min(),
                    compute["end_ns"].max(),
                )
            )
    columns = ["session", "host", "device", "kind", "step", "step_source", "start_ns", "end_ns"]
    windows = pd.DataFrame(rows, columns=columns)
    windows["step"] = windows["step"].astype("Int64")
    windows["start_ns"] = windows["start_ns"].astype("int64")
    windows["end_ns"] = windows["end_ns"].astype("int64")
    return windows


def _step_numbers(steps_line: pd.DataFrame) -> list[int]:
    """A number per event of a device's ``Steps`` line: its name when that is a number, else
    its ``group_id`` (the column: the same whether or not the frame has ``args``; from
    ``args`` in a frame made without the column), else its position."""
    import pandas as pd

    if "group_id" in steps_line:
        groups = [None if pd.isna(g) else g for g in steps_line["group_id"].tolist()]
    elif "args" in steps_line:
        groups = [a.get("group_id") if isinstance(a, dict) else None for a in steps_line["args"]]
    else:
        groups = [None] * len(steps_line)
    numbers = []
    for position, (name, group) in enumerate(
        zip(steps_line["name"].astype(str), groups, strict=True)
    ):
        if name.strip().lstrip("-").isdigit():
            numbers.append(int(name))
        elif group is not None:
            numbers.append(int(group))
        else:
            numbers.append(position)
    return numbers


def _host_bounds_of(
    host_bounds: pd.DataFrame | None, session: Any, host: Any
) -> pd.DataFrame | None:
    if host_bounds is None or host_bounds.empty:
        return None
    mine = host_bounds[host_bounds["host"].astype(str) == str(host)]
    if "session" in mine.columns:
        mine = mine[mine["session"].astype(str) == str(session)]
    return mine


def device_steps(
    events: pd.DataFrame,
    host_bounds: pd.DataFrame | None = None,
    frame: pd.DataFrame | None = None,
    windows: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per device and step: wall, busy, idle (s), duty and seconds per category."""
    import numpy as np
    import pandas as pd

    frame = device_events(_with_session(events)) if frame is None else frame
    if windows is None:
        windows = step_windows(events, frame, host_bounds)
    parts = []
    for (session, host, device), steps in windows.groupby(
        ["session", "host", "device"], observed=True, sort=True
    ):
        mine = frame[
            cols.equals(frame["session"], session)
            & cols.equals(frame["host"], host)
            & (frame["device"] == device).to_numpy()
            & frame["compute"].to_numpy()
        ]
        a = steps["start_ns"].to_numpy()
        b = steps["end_ns"].to_numpy()
        out = steps.copy()
        busy = _coverage(mine).within(a, b)
        out["wall_s"] = (b - a) / 1e9
        out["busy_s"] = busy / 1e9
        out["idle_s"] = np.maximum(b - a - busy, 0) / 1e9
        out["duty"] = np.where(b > a, busy / np.maximum(b - a, 1), np.nan)
        for name, seconds in _category_seconds(mine, a, b).items():
            out[f"{name}_s"] = seconds
        parts.append(out)
    if not parts:
        return pd.DataFrame(columns=STEP_COLUMNS)
    result = pd.concat(parts, ignore_index=True)
    return result[STEP_COLUMNS]


def _category_seconds(compute: pd.DataFrame, a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """Per category, the self time of the compute events starting in each window [a, b)."""
    import numpy as np

    starts = compute["start_ns"].to_numpy()
    wall = (compute["end_ns"].to_numpy() - starts).astype(np.float64)
    own = compute["self_ns"].to_numpy()
    times = compute["time_ns"].to_numpy()
    # Self time is measured on the device clock; steps are on the trace's (host) clock, where
    # a TPU op's converted duration differs by up to ~15%: scale self time to that clock.
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(times > 0, wall / times, 1.0)
    own = np.where(np.isnan(own), wall, own * scale)
    order = np.argsort(a, kind="stable")
    index = np.searchsorted(a[order], starts, side="right") - 1
    valid = index >= 0
    window = np.where(valid, order[np.maximum(index, 0)], 0)
    valid &= starts < b[window]
    categories = compute["category"].to_numpy()
    result = {}
    for name in CATEGORIES:
        chosen = valid & (categories == name)
        result[name] = np.bincount(window[chosen], weights=own[chosen], minlength=len(a)) / 1e9
    return result


def _coverage(frame: pd.DataFrame) -> Coverage:
    return Coverage.of(frame["start_ns"].to_numpy(), frame["end_ns"].to_numpy())


def _with_session(events: pd.DataFrame) -> pd.DataFrame:
    if "session" in events.columns:
        return events
    events = events.copy()
    events["session"] = ""
    return events


def device_utilization(
    events: pd.DataFrame,
    host_bounds: pd.DataFrame | None = None,
    frame: pd.DataFrame | None = None,
    windows: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per device over the whole capture: span, busy, idle (s), duty cycle, seconds per
    category, and how many steps were found and how (``step_source``).

    The span runs from the device's first to its last event on its op and module lines (TPU)
    or on any non-derived line (GPU), as XProf's duty cycle does.
    """
    import numpy as np
    import pandas as pd

    frame = device_events(_with_session(events)) if frame is None else frame
    if windows is None:
        windows = step_windows(events, frame, host_bounds)
    sources = windows.groupby(["session", "host", "device"], observed=True)
    rows = []
    for (session, host, device), group in frame.groupby(
        ["session", "host", "device"], observed=True, sort=True
    ):
        spanning = group[group["op_line"].to_numpy() | cols.equals(group["line"], MODULES_LINE)]
        if spanning.empty:
            continue
        start, end = int(spanning["start_ns"].min()), int(spanning["end_ns"].max())
        compute = group[group["compute"]]
        busy = _coverage(compute).total
        key = (session, host, device)
        mine = sources.get_group(key) if key in sources.groups else None
        rows.append(
            {
                "session": session,
                "host": host,
                "device": device,
                "kind": str(group["kind"].iloc[0]),
                "span_s": (end - start) / 1e9,
                "busy_s": busy / 1e9,
                "idle_s": max(end - start - busy, 0) / 1e9,
                "duty": busy / (end - start) if end > start else None,
                "steps": 0 if mine is None else int(mine["step"].notna().sum()),
                "step_source": None if mine is None else str(mine["step_source"].iloc[0]),
                **{
                    f"{name}_s": float(seconds[0])
                    for name, seconds in _category_seconds(
                        compute, np.array([start]), np.array([end + 1])
                    ).items()
                },
            }
        )
    return pd.DataFrame(rows, columns=UTILIZATION_COLUMNS)


# ---------------------------------------------------------------- ops


def device_ops(
    events: pd.DataFrame,
    devices: pd.DataFrame | None = None,
    frame: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per device and op: occurrences, total and self time (s), FLOPs, bytes, rates, bound.

    ``flops`` and ``bytes_accessed`` are totals over the occurrences (None where the trace
    has no such stat). ``bound`` is ``compute`` or ``memory`` (the op's side of the roofline)
    only where the device's peak FLOP/s and bytes/s are known (TPU plane stats).
    """
    import pandas as pd

    frame = device_events(_with_session(events)) if frame is None else frame
    ops = frame[frame["op_line"]].copy()
    if ops.empty:
        return pd.DataFrame(columns=OP_COLUMNS)
    ops["program_id"] = ops["program_id"].astype(object)
    ops["hlo_category"] = ops["hlo_category"].astype(object)
    ops["hlo_module"] = ops["hlo_module"].astype(object)
    # An op's category follows from its name and XLA category, except that its runs while the
    # compiler autotunes are a row of their own (category "autotune").
    group_keys = ["session", "host", "device", "kind", "op", "category"]
    grouped = ops.groupby(group_keys, observed=True, sort=False, dropna=False)
    table = grouped.agg(
        occurrences=("time_ns", "size"),
        total_ns=("time_ns", "sum"),
        self_ns=("self_ns", "sum"),
        flops=("flops", "sum"),
        bytes_accessed=("bytes_accessed", "sum"),
        flops_seen=("flops", "count"),
        bytes_seen=("bytes_accessed", "count"),
        hlo_category=("hlo_category", "first"),
        program_id=("program_id", "first"),
        hlo_module=("hlo_module", "first"),
    ).reset_index()
    table = _unmeasured_as_nan(table)
    table = table.rename(columns={"op": "name"})
    table["total_s"] = table["total_ns"] / 1e9
    table["self_s"] = table["self_ns"] / 1e9
    add_rates(table, devices)
    table = table.sort_values(["total_s"], ascending=False, ignore_index=True)
    return table[OP_COLUMNS]


def add_rates(table: pd.DataFrame, devices: pd.DataFrame | None) -> None:
    """Fill flops_per_s, bytes_per_s, intensity and bound from the totals (in place)."""
    import numpy as np

    seconds = table["total_s"].to_numpy(dtype=np.float64)
    flops = table["flops"].to_numpy(dtype=np.float64)
    moved = table["bytes_accessed"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        table["flops_per_s"] = np.where(seconds > 0, flops / seconds, np.nan)
        table["bytes_per_s"] = np.where(seconds > 0, moved / seconds, np.nan)
        table["intensity"] = np.where(moved > 0, flops / moved, np.nan)
    ridge: dict[str, float] = {}
    if devices is not None and not devices.empty:
        for row in devices.itertuples(index=False):
            peak_flops = getattr(row, "peak_flops_per_s", None)
            peak_bytes = getattr(row, "peak_bytes_per_s", None)
            if peak_flops and peak_bytes and peak_flops == peak_flops and peak_bytes > 0:
                ridge[f"{row.host}\0{row.device}"] = float(peak_flops) / float(peak_bytes)
    bounds = []
    for host, device, intensity in zip(
        table["host"].astype(str), table["device"].astype(str), table["intensity"], strict=True
    ):
        point = ridge.get(f"{host}\0{device}")
        if point is None or intensity != intensity:
            bounds.append(None)
        else:
            bounds.append("compute" if intensity >= point else "memory")
    table["bound"] = bounds


def top_ops(ops: pd.DataFrame, limit: int = 10, by: Sequence[str] = ("name",)) -> pd.DataFrame:
    """Ops summed over devices (and hosts), most total time first: the "top device ops"."""

    if ops.empty:
        return ops.head(0)
    grouped = ops.groupby(list(by), observed=True, sort=False, dropna=False)
    table = grouped.agg(
        category=("category", "first"),
        devices=("device", "nunique"),
        occurrences=("occurrences", "sum"),
        total_s=("total_s", "sum"),
        self_s=("self_s", "sum"),
        flops=("flops", "sum"),
        bytes_accessed=("bytes_accessed", "sum"),
        flops_seen=("flops", "count"),
        bytes_seen=("bytes_accessed", "count"),
    ).reset_index()
    table = _unmeasured_as_nan(table)
    return table.sort_values("total_s", ascending=False, ignore_index=True).head(limit)


def _unmeasured_as_nan(table: pd.DataFrame) -> pd.DataFrame:
    """FLOPs and bytes summed over no measured value are NaN (not measured), not 0. Counted
    per group rather than a Python function per group: that took minutes on a million
    distinct op names."""
    table["flops"] = table["flops"].where(table.pop("flops_seen") > 0)
    table["bytes_accessed"] = table["bytes_accessed"].where(table.pop("bytes_seen") > 0)
    return table


# ---------------------------------------------------------------- tracing-bound


def tracing_vs_device(
    events: pd.DataFrame,
    host_bounds: pd.DataFrame | None,
    frame: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per host step: what the host did against the device's busy time, and which bounds it.

    Device busy is the busiest of the host's devices within the host step's window (union of
    its compute events); ``device_idle_s`` is the rest of the window. What the host figure is
    depends on what the capture recorded (``lazy_tensor``):

    - With lazy-tensor runtime events (torch_xla): tracing time is the step's wall time minus
      the runtime's own work on its main line (graph build at sync, compile, transfers,
      waiting on the device, execution): what is left is user Python and building the lazy
      IR. The step is tracing-bound (``bound`` "tracing") when tracing takes at least
      ``TRACING_BOUND_RATIO`` x the device's busy time, else "device"; ``ratio`` is
      tracing / busy.
    - Without them (JAX, PyTorch eager): there is no lazy tracing to measure (``tracing_s``
      and ``tracing_bound`` are None). The device's idle time in the step is host time it
      waited through (Python, input batches, data loading, sleeps). The step is host-bound
      (``bound`` "host") when the device idles at least ``HOST_BOUND_RATIO`` x its busy time,
      else "device"; ``ratio`` is idle / busy.

    A device that idles the whole step is bound by the host when the host took any time.
    """
    import numpy as np
    import pandas as pd

    if host_bounds is None or host_bounds.empty:
        return pd.DataFrame(columns=TRACING_COLUMNS)
    events = _with_session(events)
    frame = device_events(events) if frame is None else frame
    bounds = host_bounds if "session" in host_bounds.columns else _with_session(host_bounds)
    rows = []
    for (session, host), mine in bounds.groupby(["session", "host"], observed=True):
        on_host = events[
            cols.equals(events["session"], session)
            & cols.equals(events["host"], host)
            & cols.equals(events["plane_kind"], "host")
        ]
        lazy = has_lazy_tensor_runtime(on_host)
        line = _main_line(on_host)
        runtime = on_host[
            cols.equals(on_host["line"], line) & cols.member(on_host["name"], _HOST_RUNTIME_EVENTS)
        ]
        a = mine["start_ns"].to_numpy()
        b = mine["end_ns"].to_numpy()
        tracing = np.maximum((b - a) - _coverage(runtime).within(a, b), 0) / 1e9
        compute = frame[
            cols.equals(frame["session"], session)
            & cols.equals(frame["host"], host)
            & frame["compute"].to_numpy()
        ]
        per_device = [
            _coverage(group).within(a, b) for _, group in compute.groupby("device", sort=True)
        ]
        busy = np.max(per_device, axis=0) / 1e9 if per_device else None
        for index, step in enumerate(mine["step"]):
            wall = (b[index] - a[index]) / 1e9
            device_busy = None if busy is None else float(busy[index])
            idle = None if device_busy is None else max(wall - device_busy, 0.0)
            host_s = float(tracing[index]) if lazy else idle
            ratio = host_s / device_busy if device_busy and host_s is not None else None
            limit = TRACING_BOUND_RATIO if lazy else HOST_BOUND_RATIO
            if device_busy is None or host_s is None:
                bound = None
            elif device_busy == 0:  # the device idled all step: bound by the host if it worked
                bound = ("tracing" if lazy else "host") if host_s > 0 else "device"
            elif host_s >= limit * device_busy:
                bound = "tracing" if lazy else "host"
            else:
                bound = "device"
            rows.append(
                {
                    "session": session,
                    "host": host,
                    "step": int(step),
                    "host_wall_s": wall,
                    "tracing_s": float(tracing[index]) if lazy else None,
                    "device_busy_s": device_busy,
                    "ratio": ratio,
                    "tracing_bound": None if bound is None or not lazy else bound == "tracing",
                    "device_idle_s": idle,
                    "lazy_tensor": lazy,
                    "bound": bound,
                }
            )
    return pd.DataFrame(rows, columns=TRACING_COLUMNS)


def has_lazy_tensor_runtime(host_events: pd.DataFrame) -> bool:
    """Whether a host's events hold the lazy-tensor runtime's own (``LAZY_TENSOR_EVENTS``)."""
    return bool(cols.member(host_events["name"], LAZY_TENSOR_EVENTS).any())


def _main_line(host_events: pd.DataFrame) -> str | None:
    """The host line the lazy-tensor runtime traces on: the one with StepMarker/sync events."""
    marked = host_events[
        cols.member(host_events["name"], ("StepMarker", "SyncTensorsGraphInternal"))
    ]
    if len(marked):
        return str(marked["line"].astype(str).mode().iloc[0])
    return "python" if cols.equals(host_events["line"], "python").any() else None


# ---------------------------------------------------------------- per-host summaries


@dataclass
class HostSummary:
    """What one host's capture reduces to: small, additive tables a parent can merge.

    ``devices`` (device table), ``steps`` (``device_steps``), ``ops`` (``device_ops``, with
    additive columns only re-derived after a merge), ``utilization`` (``device_utilization``)
    and ``tracing`` (``tracing_vs_device``), all keyed by session and host; ``events`` is the
    raw event count and ``warnings`` what was wrong with the capture.
    """

    devices: pd.DataFrame
    steps: pd.DataFrame
    ops: pd.DataFrame
    utilization: pd.DataFrame
    tracing: pd.DataFrame
    events: int = 0
    warnings: list[str] = field(default_factory=list)


def summarize_host(
    events: pd.DataFrame,
    devices: pd.DataFrame | None = None,
    host_bounds: pd.DataFrame | None = None,
) -> HostSummary:
    """Reduce one host's (or any) events to a ``HostSummary`` (see the module docstring)."""
    import pandas as pd

    events = _with_session(events)
    frame = device_events(events)
    windows = step_windows(events, frame, host_bounds)
    return HostSummary(
        devices=devices if devices is not None else pd.DataFrame(),
        steps=device_steps(events, host_bounds, frame=frame, windows=windows),
        ops=device_ops(events, devices, frame=frame),
        utilization=device_utilization(events, host_bounds, frame=frame, windows=windows),
        tracing=tracing_vs_device(events, host_bounds, frame),
        events=len(events),
    )


def merge_summaries(summaries: Iterable[HostSummary]) -> HostSummary:
    """One summary from several hosts' (concatenation: rows are keyed by session and host)."""
    import pandas as pd

    summaries = list(summaries)

    def cat(name: str, columns: list[str] | None) -> pd.DataFrame:
        frames = [getattr(s, name) for s in summaries if not getattr(s, name).empty]
        if not frames:
            return pd.DataFrame(columns=columns)
        return pd.concat(frames, ignore_index=True)

    ops = cat("ops", OP_COLUMNS).sort_values("total_s", ascending=False, ignore_index=True)
    return HostSummary(
        devices=cat("devices", None),
        steps=cat("steps", STEP_COLUMNS),
        ops=ops,
        utilization=cat("utilization", UTILIZATION_COLUMNS),
        tracing=cat("tracing", TRACING_COLUMNS),
        events=sum(s.events for s in summaries),
        warnings=[w for s in summaries for w in s.warnings],
    )
