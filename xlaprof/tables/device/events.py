"""Each device's events: which count as busy (``compute``), their op, category and times.

Device planes as they are; for a host whose capture has no device plane with events, the host
plane's events that carry an ``hlo_op`` (the CPU executor's XLA ops) as device ``CPU``.

**TPU events on the device clock.** A TPU op carries its place and length on the chip's own
clock (``device_offset_ps``, ``device_duration_ps``) besides its timestamps converted to the
host's clock; the conversion is re-synchronised now and then, so a converted op can be half its
device length (v6e capture: a ``copy-done.4`` of 194.45 ms on the chip, 97.45 ms converted).
Op totals are on the device clock (as XProf's), so the device's timeline is too: each op is
placed at its device offset (shifted by the device's median host-minus-device offset, so the
two clocks agree where most events are), and the device's other events (``XLA Modules``,
``Async XLA Ops``, ``Steps``) are moved with the nearest op boundary: a start with the next op
boundary at or after it, an end with the last one at or before it. Busy time, steps and
category seconds are then all on one clock; on the v6e capture the spans and busy time equal
XProf's ``op_profile`` to the microsecond.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from xlaprof.parse.events import COMPILE_EVENTS, DERIVED_LINES, TPU_OP_LINES
from xlaprof.tables import categorical as cols
from xlaprof.tables.device.categories import OFF_DUTY_CATEGORIES, categorize, short_name
from xlaprof.tables.intervals import Coverage, nesting

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


# Kineto categories on GPU planes that annotate rather than execute.
_ANNOTATION_CATS = frozenset({"gpu_user_annotation", "user_annotation"})


def device_events(events: pd.DataFrame) -> pd.DataFrame:
    """Each device's events, with ``compute`` (counts as busy), ``op`` and ``category``.

    Device planes as they are; for a host whose capture has no device plane with events, the
    host plane's events that carry an ``hlo_op`` (the CPU executor's XLA ops) as device ``CPU``.
    Also ``time_ns`` and ``self_ns`` (op lines), ``parent_op`` (the op an op runs inside on its
    line: a fusion inside ``call.4`` or ``while.24``), ``short_name`` (a kernel's function name,
    ``categories.short_name``) and ``framework_op`` (the framework's op the event belongs to:
    the ``name`` stat, JAX's name stack, else ``tf_op``; None where the capture has neither).
    TPU events are on the device clock (module docstring).
    """
    import numpy as np
    import pandas as pd

    # Categorical comparisons and per-category lookups: astype(str) on every event is slow.
    on_device = (events["plane_kind"] == "device").to_numpy()
    hosts_with_devices = set(events.loc[on_device, "host"].astype(str).unique())
    host_rows = (events["plane_kind"] == "host").to_numpy() & ~events["host"].isin(
        hosts_with_devices
    ).to_numpy()
    cpu_ops = host_rows & events["hlo_op"].notna().to_numpy()
    frame = events[on_device | cpu_ops]  # a new frame (copy on write): events are not touched
    host_plane = cols.equals(frame["plane_kind"], "host")
    # each row's device as a code into its distinct values (host-plane rows: "CPU"; missing:
    # NaN), so the device kind is named once per device
    device_codes, distinct = cols.coded(frame["device"])
    values = np.array([*distinct, "CPU", np.nan], dtype=object)
    device_codes = np.where(device_codes < 0, len(values) - 1, device_codes)
    device_codes[host_plane] = len(values) - 2
    devices = values[device_codes]
    frame["device"] = devices
    _to_device_clock(frame)
    kinds = np.array([str(d).split(":", 1)[0].upper() for d in values.tolist()], dtype=object)
    frame["kind"] = kinds[device_codes]
    line = frame["line"]  # a categorical: isin tests its categories
    kind = kinds[device_codes]
    hlo_category = frame["hlo_category"].astype(object)
    args = frame["args"]
    cat = pd.Series(_stat(args, "cat"), index=frame.index, dtype=object)
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
    frame["category"] = _categories(
        hlo_category.where(hlo_category.notna(), None).to_numpy(dtype=object),
        text.to_numpy(dtype=object),
        cat.to_numpy(dtype=object),
    )
    frame.loc[_while_compiling(events, frame), "category"] = "autotune"
    time_ns, self_ns, parents = _op_times(frame)
    frame["time_ns"], frame["self_ns"] = time_ns, self_ns
    ops = frame["op"].to_numpy()
    not_nested = np.array(None)  # an object array: None where an op is in no other op
    frame["parent_op"] = np.where(parents >= 0, ops[np.maximum(parents, 0)], not_nested)
    frame["short_name"] = _each_distinct(ops, lambda name: short_name(str(name)))
    if "framework_op" in frame:  # made by the parse where the frame has no args (a pod's)
        ops_of = frame["framework_op"].astype(object)
        frame["framework_op"] = ops_of.where(ops_of.notna(), None)
    else:
        frame["framework_op"] = _framework_ops(args)
    return frame


_NONE = object()  # None as a value of its own (pandas counts None and NaN as one missing value)


def _factorize(values: np.ndarray) -> tuple[np.ndarray, list[Any]]:
    """Codes and distinct values of an object array, None a value like any other (NaN and
    other missing floats still get code -1)."""
    import numpy as np
    import pandas as pd

    if not pd.isna(values).any():  # nothing missing: no None to tell apart
        codes, distinct = pd.factorize(values)
        return codes, distinct.tolist()
    keyed = values.copy()
    keyed[np.equal(values, np.array(None, dtype=object))] = _NONE
    codes, distinct = pd.factorize(keyed)
    return codes, [None if value is _NONE else value for value in distinct.tolist()]


def _each_distinct(values: np.ndarray, convert: Callable[[Any], Any]) -> np.ndarray:
    """``convert(value)`` per row (an object array), called once per distinct value."""
    import numpy as np

    codes, distinct = _factorize(values)
    out = np.empty(len(distinct) + 1, dtype=object)
    out[:-1] = [convert(value) for value in distinct]
    result = np.asarray(out[codes], dtype=object)
    missing = np.flatnonzero(codes < 0)  # NaN and the like: each from its own value
    result[missing] = [convert(value) for value in values[missing].tolist()]
    return result


def _categories(hlo_category: np.ndarray, text: np.ndarray, cat: np.ndarray) -> np.ndarray:
    """``categorize`` per row, called once per distinct (XLA category, text, Kineto cat)."""
    import numpy as np

    keys = [_factorize(column)[0] for column in (hlo_category, text, cat)]
    missing = np.logical_or.reduce([key < 0 for key in keys])  # NaN and the like: one by one
    group, first = cols.group_codes(keys)
    labels = np.array(
        [categorize(hlo_category[row], str(text[row]), cat[row]) for row in first.tolist()],
        dtype=object,
    )
    result = np.asarray(labels[group], dtype=object)
    for row in np.flatnonzero(missing).tolist():
        result[row] = categorize(hlo_category[row], str(text[row]), cat[row])
    return result


def _stat(args: pd.Series, key: str) -> np.ndarray:
    """Per event (``args``: the column of its stats' dicts), its stat ``key``, None where
    absent; an XSpace frame's stats are read without making their dicts."""
    from xlaprof.parse.xplane.args import stat_values

    return stat_values(args, key)


def _framework_ops(args: pd.Series) -> np.ndarray:
    """Per event, its framework op from its stats: ``name`` (JAX's name stack, e.g.
    ``jit(loss_fn)/jvp()/convert_element_type``), else ``tf_op`` unless it is only XLA's
    placeholder (``XlaModule:``); None where neither is usable text. Each distinct value is
    judged once."""
    import numpy as np
    import pandas as pd

    chosen = np.full(len(args), None, dtype=object)
    for key in ("tf_op", "name"):  # the name stack, where usable, wins: it is set last
        values = _stat(args, key)
        codes, distinct = pd.factorize(values)
        usable = [isinstance(v, str) and v != "" and not v.endswith(":") for v in distinct]
        take = np.asarray([*usable, False], dtype=bool)[codes]  # code -1 (None): the last
        chosen[take] = values[take]
    return chosen


def _to_device_clock(frame: pd.DataFrame) -> None:
    """Move each TPU's events onto its device clock, in place (see the module docstring)."""
    import numpy as np

    offsets = frame["device_offset_ps"].to_numpy()
    durations = frame["device_duration_ps"].to_numpy()
    timed = ~np.isnan(offsets) & ~np.isnan(durations)
    if not timed.any():
        return
    starts = frame["start_ns"].to_numpy().copy()
    ends = frame["end_ns"].to_numpy().copy()
    # one code per (session, host, device): each device is moved on its own
    keys = cols.group_codes([cols.codes(frame[name]) for name in ("session", "host", "device")])[0]
    for key in np.unique(keys[timed]).tolist():
        mine = keys == key
        ops = mine & timed
        host_start, host_end = starts[ops], ends[ops]
        device_start = offsets[ops] / 1000.0
        shift = float(np.median(host_start - device_start))
        new_start = np.rint(device_start + shift).astype(np.int64)
        new_end = np.rint((offsets[ops] + durations[ops]) / 1000.0 + shift).astype(np.int64)
        new_end = np.maximum(new_end, new_start)
        # knots: each op's start and end on both clocks, in host order
        knots_host = np.concatenate([host_start, host_end])
        knots_delta = np.concatenate([new_start - host_start, new_end - host_end])
        order = np.argsort(knots_host, kind="stable")
        knots_host, knots_delta = knots_host[order], knots_delta[order]
        others = np.flatnonzero(mine & ~timed)
        if len(others):
            at = np.clip(np.searchsorted(knots_host, starts[others], "left"), 0, len(order) - 1)
            until = np.clip(np.searchsorted(knots_host, ends[others], "right") - 1, 0, None)
            moved_start = starts[others] + knots_delta[at]
            moved_end = ends[others] + knots_delta[until]
            starts[others] = moved_start
            ends[others] = np.maximum(moved_end, moved_start)
        starts[ops], ends[ops] = new_start, new_end
    frame["start_ns"] = starts
    frame["end_ns"] = ends


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


def _op_times(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each op-line event's time (device clock where known), self time, in ns (NaN off ops),
    and the row of the op it is nested in (-1: none).

    Self time is the time not spent in ops nested inside, on the same line: on TPUs nesting is
    read on the device clock (``device_offset_ps``), where ops never overlap (XProf does the
    same); converted host-clock timestamps can overlap by a few ns.
    """
    import numpy as np

    time_ns = np.full(len(frame), np.nan)
    self_ns = np.full(len(frame), np.nan)
    parents = np.full(len(frame), -1, dtype=np.int64)
    ops = np.flatnonzero(frame["op_line"].to_numpy())
    if not len(ops):
        return time_ns, self_ns, parents
    on_device = frame["device_duration_ps"].to_numpy()[ops]
    starts = frame["start_ns"].to_numpy()[ops]
    wall = frame["end_ns"].to_numpy()[ops] - starts
    times = np.where(np.isnan(on_device), wall, on_device / 1000.0)
    offsets = frame["device_offset_ps"].to_numpy()[ops]
    # One group per (session, host, device, line), found from the columns' codes (a row with
    # a missing key is in no group, as in groupby).
    keys = [cols.codes(frame[name])[ops] for name in ("session", "host")]
    keys += [cols.codes(frame[name].take(ops)) for name in ("device", "line")]
    keyed = np.flatnonzero(np.logical_and.reduce([key >= 0 for key in keys]))
    group = cols.group_codes([key[keyed] for key in keys])[0] if len(keyed) else keyed
    sizes = np.bincount(group)
    own = np.full(len(ops), np.nan)  # an op in no group (a missing key): not measured
    parent = np.full(len(ops), -1, dtype=np.int64)
    for index in np.split(keyed[np.argsort(group, kind="stable")], np.cumsum(sizes)[:-1]):
        if not np.isnan(offsets[index]).any():
            begin = offsets[index].astype(np.int64)
            end = begin + (times[index] * 1000.0).astype(np.int64)
            own_ps, up = nesting(begin, end)
            own[index] = own_ps / 1000.0
        else:
            begin = starts[index] - starts[index].min()
            end = begin + times[index].astype(np.int64)
            own[index], up = nesting(begin, end)
        parent[index] = np.where(up >= 0, index[np.maximum(up, 0)], -1)
    time_ns[ops] = times
    self_ns[ops] = own
    parents[ops] = np.where(parent >= 0, ops[np.maximum(parent, 0)], -1)
    return time_ns, self_ns, parents
