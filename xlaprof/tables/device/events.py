"""Each device's events: which count as busy (``compute``), their op, category and times.

Device planes as they are; for a host whose capture has no device plane with events, the host
plane's events that carry an ``hlo_op`` (the CPU executor's XLA ops) as device ``CPU``, with the
CPU client's executions (``ThunkExecutor::Execute``, and its wait for the thunks it handed to
the client's worker threads) counted as busy but as no op: the worker threads run an
execution's thunks in pieces the profiler does not record, so the ops alone cover about a
third of a 1024x1024 matmul chain's execution on torch_xla's CPU client (measured here, 2026-12
on a 2-core VM: 15-20 ms of ops in a 73 ms execution).

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

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from xlaprof.parse.events import COLUMNS, COMPILE_EVENTS, DERIVED_LINES, TPU_OP_LINES
from xlaprof.tables import categorical as cols
from xlaprof.tables.device.categories import OFF_DUTY_CATEGORIES, categorize, short_name
from xlaprof.tables.intervals import Coverage, nesting

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


# The events' columns the device tables read (``device_events(events, MODEL_COLUMNS)``): all
# but the plane's name, the duration (the tables read start and end) and the host's step
# stats (``step_num``, and the ``step`` numbered from it), with the load's session and the
# framework op a frame without ``args`` carries as a column.
MODEL_COLUMNS = (frozenset(COLUMNS) - {"plane", "duration_ns", "step_num"}) | {
    "session",
    "framework_op",
}

# The stats the analysis reads from an event's ``args`` (here ``cat``, ``tf_op`` and ``name``;
# ``group_id`` in ``steps``, ``cat`` in ``host_steps``): the pipeline loads a capture's events
# with these alone (``load_trace(args=STATS_READ)``). A read of any other from such a frame
# raises (``parse.xplane.args.EventStats``), so a new one is added here or fails every test
# that analyses a capture.
STATS_READ = frozenset({"cat", "tf_op", "name", "group_id"})

# The CPU client's execution of a compiled program (PJRT's CPU thunk executor: "ThunkExecutor::
# Execute", and "... (wait for completion)" while its worker threads run the thunks).
CPU_EXECUTION = "ThunkExecutor::Execute"

# Kineto categories on GPU planes that annotate rather than execute.
_ANNOTATION_CATS = frozenset({"gpu_user_annotation", "user_annotation"})


def device_events(events: pd.DataFrame, columns: Collection[str] | None = None) -> pd.DataFrame:
    """Each device's events, with ``compute`` (counts as busy), ``op`` and ``category``.

    Device planes as they are; for a host whose capture has no device plane with events, the
    host plane's events that carry an ``hlo_op`` (the CPU executor's XLA ops) as device ``CPU``.
    Also ``time_ns`` and ``self_ns`` (op lines), ``parent_op`` (the op an op runs inside on its
    line: a fusion inside ``call.4`` or ``while.24``), ``short_name`` (a kernel's function name,
    ``categories.short_name``) and ``framework_op`` (the framework's op the event belongs to:
    the ``name`` stat, JAX's name stack, else ``tf_op``; missing where the capture has neither).
    TPU events are on the device clock (module docstring).

    ``device``, ``kind``, ``op``, ``category``, ``short_name``, ``parent_op`` and (from
    ``args``) ``framework_op`` are categoricals (missing where there is none): each is worked
    out per distinct value (a device's kind, an op's category) and spread to the rows through
    integer codes, and the tables read their codes, not a string per row.

    ``columns``: the events' columns to keep (None: all; ``MODEL_COLUMNS``: those the device
    tables read), since copying the device events' rows of each column is most of the cost.
    """
    import numpy as np
    import pandas as pd

    # Categorical comparisons and per-category lookups: astype(str) on every event is slow.
    rows = _device_rows(events)
    kept = [c for c in events.columns if columns is None or c in columns]
    frame = rows_of(events, rows, kept)  # events are not touched
    host_plane = cols.equals(frame["plane_kind"], "host")
    # each row's device as a code into its distinct values (host-plane rows: "CPU"; missing:
    # NaN), so the device kind is named once per device
    device_codes, distinct = cols.coded(frame["device"])
    values = [*distinct, "CPU", np.nan]
    device_codes = np.where(device_codes < 0, len(values) - 1, device_codes)
    device_codes[host_plane] = len(values) - 2
    frame["device"] = cols.from_codes(device_codes, values)
    _to_device_clock(frame)
    kinds = [str(d).split(":", 1)[0].upper() for d in values]
    frame["kind"] = cols.from_codes(device_codes, kinds)
    tpu = np.array([k == "TPU" for k in kinds], dtype=bool)[device_codes]
    line = frame["line"]
    category_codes, hlo_categories = cols.coded(frame["hlo_category"])
    cat = _stat(frame["args"], "cat")
    cat_codes, cats = _factorize(cat)
    annotation = np.array([*(c in _ANNOTATION_CATS for c in cats), False], dtype=bool)
    op_lines = cols.member(line, TPU_OP_LINES)
    compute = np.where(
        tpu,
        op_lines & ~cols.member(frame["hlo_category"], OFF_DUTY_CATEGORIES),
        ~cols.member(line, DERIVED_LINES) & ~annotation[cat_codes],
    )
    executing = cols.contains(frame["name"], CPU_EXECUTION) & host_plane
    frame["compute"] = compute
    frame["op_line"] = np.where(tpu, op_lines, compute) & ~executing
    op_codes, ops = _ops(frame["hlo_op"], frame["name"])
    frame["op"] = pd.Categorical.from_codes(
        op_codes, dtype=pd.CategoricalDtype(pd.Index(ops)), validate=False
    )
    # TPU ops are categorized by their HLO category and text (the memory space of a copy is
    # in the shapes of the event name); GPU kernels by their op or kernel name.
    names = cols.coded(frame["name"])
    text = np.where(category_codes >= 0, np.take(_in_ops(names, ops), names[0]), op_codes)
    category, labels = _categories(
        (category_codes, [*hlo_categories, None]),
        (text, [*ops, np.nan]),
        (cat_codes, cat),
    )
    category[_while_compiling(events, frame)] = len(labels)
    category[executing] = -1  # busy, but no op: in no category
    frame["category"] = cols.from_codes(category, [*labels, "autotune"])
    time_ns, self_ns, parents = _op_times(frame)
    frame["time_ns"], frame["self_ns"] = time_ns, self_ns
    op_values = np.array([*ops, np.nan], dtype=object)  # code -1 (no op): the last
    # the op each op runs inside (missing where it is in no other op)
    frame["parent_op"] = cols.from_codes(
        np.where(parents >= 0, op_codes[np.maximum(parents, 0)], -1), ops
    )
    named = np.where(op_codes < 0, len(ops), op_codes)
    used = np.bincount(named, minlength=len(op_values)) > 0  # names of ops no row has: unread
    shorts = [short_name(str(n)) if u else "" for n, u in zip(op_values, used, strict=True)]
    frame["short_name"] = cols.from_codes(named, shorts)
    if "framework_op" in frame:  # made by the parse where the frame has no args (a pod's)
        ops_of = frame["framework_op"].astype(object)
        frame["framework_op"] = ops_of.where(ops_of.notna(), None)
    else:
        frame["framework_op"] = _framework_ops(frame["args"])
    return frame


def _ops(hlo_op: pd.Series, name: pd.Series) -> tuple[np.ndarray, list[Any]]:
    """Each row's op, its ``hlo_op`` where it has one, else its ``name``: codes into the
    distinct ops (-1: neither), found from the two columns' codes."""
    import numpy as np

    hlo_codes, hlo_ops = cols.coded(hlo_op)
    names = cols.coded(name)
    in_ops = _in_ops((hlo_codes, hlo_ops), hlo_ops)
    ops = list(hlo_ops)
    from_names = _in_ops(names, ops)  # extends ops with the names that are no hlo_op
    codes = np.where(hlo_codes >= 0, np.take(in_ops, hlo_codes), np.take(from_names, names[0]))
    return codes, ops


def _in_ops(coded: tuple[np.ndarray, list[Any]], ops: list[Any]) -> np.ndarray:
    """A lookup from ``coded``'s codes (codes and their values) to positions in ``ops``
    (distinct values; a value not there yet is appended), -1 for a missing value (the
    lookup's last entry: code -1)."""
    import numpy as np
    import pandas as pd

    position = {value: at for at, value in enumerate(ops)}
    found = np.full(len(coded[1]) + 1, -1, dtype=np.int64)
    for at, value in enumerate(coded[1]):
        if not pd.isna(value):
            found[at] = position.setdefault(value, len(ops))
            if found[at] == len(ops):
                ops.append(value)
    return found


def _device_rows(events: pd.DataFrame) -> np.ndarray:
    """The rows of the device events: device planes', and the host plane's XLA ops (an
    ``hlo_op``) and CPU executions of hosts with no device plane."""
    import numpy as np

    on_device = cols.equals(events["plane_kind"], "device")
    host_codes = cols.codes(events["host"])
    with_devices = np.zeros(int(host_codes.max(initial=-1)) + 2, dtype=bool)  # last: missing
    if on_device.any():
        with_devices[host_codes[on_device]] = True
    host_rows = cols.equals(events["plane_kind"], "host")
    if with_devices.any():  # hosts with a device plane: their host planes are no device
        host_rows &= ~with_devices[host_codes]
    cpu_ops = host_rows & (
        cols.present(events["hlo_op"]) | cols.contains(events["name"], CPU_EXECUTION)
    )
    found: np.ndarray = np.flatnonzero(on_device | cpu_ops)
    return found


def rows_of(
    frame: pd.DataFrame, rows: np.ndarray, columns: list[str] | None = None
) -> pd.DataFrame:
    """``frame[columns].take(rows)`` (its index too; None: every column), built column by
    column: a categorical from its taken codes, a numpy column by a numpy take (one value
    every row views stays so), without pandas' checks per column (each column of a million
    events costs one gather)."""
    import numpy as np
    import pandas as pd

    columns = list(frame.columns) if columns is None else columns
    data: dict[str, Any] = {}
    for name in columns:
        column = frame[name]
        values = column.array
        if isinstance(values, pd.Categorical):
            data[name] = pd.Categorical.from_codes(
                values.codes[rows], dtype=values.dtype, validate=False
            )
        elif isinstance(column.dtype, np.dtype):
            found = column.to_numpy()
            # one read-only value every row views (``xspace_frame(read_only=True)``): the
            # rows' view it
            is_one = found.ndim == 1 and found.strides == (0,) and len(found)
            data[name] = np.broadcast_to(found[:1], (len(rows),)) if is_one else found[rows]
        else:
            data[name] = values.take(rows)
    return pd.DataFrame(data, index=frame.index[rows], columns=columns, copy=False)


_NONE = object()  # None as a value of its own (pandas counts None and NaN as one missing value)


def _factorize(values: np.ndarray) -> tuple[np.ndarray, list[Any]]:
    """Codes and distinct values of an object array, None a value like any other (NaN and
    other missing floats still get code -1)."""
    import numpy as np
    import pandas as pd

    if np.equal(values, np.array(None, dtype=object)).all():  # no value (an absent stat)
        return np.zeros(len(values), dtype=np.int64), [None] if len(values) else []
    if not pd.isna(values).any():  # nothing missing: no None to tell apart
        codes, distinct = pd.factorize(values)
        return codes, distinct.tolist()
    keyed = values.copy()
    keyed[np.equal(values, np.array(None, dtype=object))] = _NONE
    codes, distinct = pd.factorize(keyed)
    return codes, [None if value is _NONE else value for value in distinct.tolist()]


def _categories(
    hlo_category: tuple[np.ndarray, list[Any]],
    text: tuple[np.ndarray, list[Any]],
    cat: tuple[np.ndarray, np.ndarray],
) -> tuple[np.ndarray, list[str]]:
    """``categorize`` per row, called once per distinct (XLA category, text, Kineto cat): each
    row's code into the labels, and the labels.

    The first two are codes into their values (code -1: the values' last entry); ``cat`` the
    codes of the Kineto categories (``_factorize``) and the categories themselves, per row
    (a row of a missing one is categorized on its own)."""
    import numpy as np

    cat_codes, cats = cat
    group, first = cols.group_codes([hlo_category[0], text[0], cat_codes])
    hlo, words = hlo_category[1], text[1]

    def label(row: int) -> str:
        return categorize(hlo[hlo_category[0][row]], str(words[text[0][row]]), cats[row])

    labels = [label(row) for row in first.tolist()]
    for row in np.flatnonzero(cat_codes < 0).tolist():  # NaN and the like: one by one
        group[row] = len(labels)
        labels.append(label(row))
    return group, labels


def _stat(args: pd.Series, key: str) -> np.ndarray:
    """Per event (``args``: the column of its stats' dicts), its stat ``key``, None where
    absent; an XSpace frame's stats are read without making their dicts."""
    from xlaprof.parse.xplane.args import stat_values

    return stat_values(args, key)


def _framework_ops(args: pd.Series) -> pd.Categorical:
    """Per event, its framework op from its stats: ``name`` (JAX's name stack, e.g.
    ``jit(loss_fn)/jvp()/convert_element_type``), else ``tf_op`` unless it is only XLA's
    placeholder (``XlaModule:``); missing where neither is usable text. Each distinct value
    is judged once; the rows get codes into the values chosen."""
    import numpy as np
    import pandas as pd

    chosen = np.full(len(args), -1, dtype=np.int64)
    listed: list[Any] = []
    for key in ("tf_op", "name"):  # the name stack, where usable, wins: it is set last
        values = _stat(args, key)
        if np.equal(values, np.array(None, dtype=object)).all():  # no event has it
            continue
        codes, distinct = pd.factorize(values)
        usable = [isinstance(v, str) and v != "" and not v.endswith(":") for v in distinct]
        take = np.asarray([*usable, False], dtype=bool)[codes]  # code -1 (None): the last
        chosen[take] = len(listed) + codes[take]
        listed += distinct.tolist()
    return cols.from_codes(chosen, listed)


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
    gpu = frame["compute"].to_numpy() & cols.equals(frame["kind"], "GPU")
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

    A 1 GB host has millions of device rows, so each row-long array here counts: where every
    row is an op with a whole key (the common case) the columns are read in place, not
    gathered, and what is done with is let go before the next is made.
    """
    import numpy as np

    time_ns = np.full(len(frame), np.nan)
    self_ns = np.full(len(frame), np.nan)
    # Row numbers as int32 where they fit (4 bytes a row less in each array of them).
    index_type = np.int32 if len(frame) <= np.iinfo(np.int32).max else np.intp
    ops = np.flatnonzero(frame["op_line"].to_numpy()).astype(index_type)
    if not len(ops):
        return time_ns, self_ns, np.full(len(frame), -1, dtype=np.int64)
    every = slice(None) if len(ops) == len(frame) else ops  # every row an op: no gather
    starts = frame["start_ns"].to_numpy()[every]
    on_device = frame["device_duration_ps"].to_numpy()[every]
    wall = frame["end_ns"].to_numpy()[every] - starts
    times = np.where(np.isnan(on_device), wall, on_device / 1000.0)
    del on_device, wall
    time_ns[every] = times
    # The ops' device offsets, where any op has one (a CPU host's ops have none: not gathered).
    device_offsets = frame["device_offset_ps"].to_numpy()
    offsets = None if np.isnan(device_offsets).all() else device_offsets[every]
    del device_offsets
    # One group per (session, host, device, line), found from the columns' codes (a row with
    # a missing key is in no group, as in groupby).
    keys = [cols.codes(frame[name])[every] for name in ("session", "host", "device", "line")]
    whole = np.logical_and.reduce([key >= 0 for key in keys])
    keyed: slice | np.ndarray = slice(None) if whole.all() else np.flatnonzero(whole)
    del whole
    group = cols.group_codes([key[keyed] for key in keys])[0]
    del keys
    count = int(group.max()) + 1 if len(group) else 0
    unnested = _unnested(keyed, (group, count), (starts, offsets, times))
    if unnested is not None:  # no op runs inside another: each its own time, no parent
        if isinstance(keyed, slice) and isinstance(every, slice):
            self_ns = unnested
        else:
            own = np.full(len(times), np.nan)  # an op in no group (a missing key): not measured
            own[keyed] = unnested
            self_ns[every] = own
        return time_ns, self_ns, np.full(len(frame), -1, dtype=np.int64)
    rows = np.arange(len(times), dtype=index_type) if isinstance(keyed, slice) else keyed
    own = np.full(len(times), np.nan)  # an op in no group (a missing key): not measured
    parent: np.ndarray = np.full(len(times), -1, dtype=index_type)
    for index in cols.split_groups(rows, group, count):
        if offsets is not None and not np.isnan(offsets[index]).any():
            begin = offsets[index].astype(np.int64)
            end = begin + (times[index] * 1000.0).astype(np.int64)
            own_ps, up = nesting(begin, end)
            own[index] = own_ps / 1000.0
        else:
            begin = starts[index] - starts[index].min()
            end = begin + times[index].astype(np.int64)
            own[index], up = nesting(begin, end)
        parent[index] = np.where(up >= 0, index[np.maximum(up, 0)], -1)
    self_ns[every] = own
    del own
    parents = np.full(len(frame), -1, dtype=np.int64)
    parents[ops] = np.where(parent >= 0, ops[np.maximum(parent, 0)], -1)
    return time_ns, self_ns, parents


def _unnested(
    keyed: slice | np.ndarray,
    groups: tuple[np.ndarray, int],
    clocks: tuple[np.ndarray, np.ndarray | None, np.ndarray],
) -> np.ndarray | None:
    """``_op_times``' self times of the ops at ``keyed`` where no op on a line runs inside
    another (each line's ops in start order, each starting at or after the one before ends):
    each op's own time, on the clock ``_op_times`` reads its line on (the device clock, in
    whole ps, where every op of the line has a device offset; else whole ns), as ``nesting``
    gives it. None where some op may nest (``_op_times`` then walks each line).
    ``groups``: each op's line and their count; ``clocks``: the ops' starts, device offsets
    and times (offsets None: no op has one). The lines' ops are sorted together only where
    they are not already (group codes number lines as they first appear, so codes that never
    fall mean each line's ops come one after another)."""
    import numpy as np

    group, count = groups
    starts, times = clocks[0][keyed], clocks[2][keyed]
    begin = starts.copy()
    length = times.astype(np.int64)
    device = None
    if clocks[1] is not None:
        offsets = clocks[1][keyed]
        missing = np.isnan(offsets)
        device = (np.bincount(group, weights=missing, minlength=count) == 0)[group]
        del missing
        begin[device] = offsets[device].astype(np.int64)
        length[device] = (times[device] * 1000.0).astype(np.int64)
        del offsets
    del starts, times
    end = begin + length
    if count > 1 and not (group[1:] >= group[:-1]).all():  # each line's ops together
        order = np.argsort(group.astype(np.uint16) if count <= 1 << 16 else group, kind="stable")
        begin, end, group = begin[order], end[order], group[order]
        del order
    later = begin[1:] - begin[:-1]
    in_order = (later > 0) | ((later == 0) & (end[1:] <= end[:-1]))
    del later
    in_order &= begin[1:] >= end[:-1]  # and apart
    if not (length >= 0).all() or not ((group[1:] != group[:-1]) | in_order).all():
        return None
    own: np.ndarray = length.astype(np.float64)
    if device is not None:
        own[device] = own[device] / 1000.0
    return own
