"""Each device's events: which count as busy (``compute``), their op, category and times.

Device planes as they are; for a host whose capture has no device plane with events, the host
plane's events that carry an ``hlo_op`` (the CPU executor's XLA ops) as device ``CPU``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlaprof.parse.events import COMPILE_EVENTS, DERIVED_LINES, TPU_OP_LINES
from xlaprof.tables import categorical as cols
from xlaprof.tables.device.categories import OFF_DUTY_CATEGORIES, categorize
from xlaprof.tables.intervals import Coverage, self_times_ns

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


# Kineto categories on GPU planes that annotate rather than execute.
_ANNOTATION_CATS = frozenset({"gpu_user_annotation", "user_annotation"})


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
