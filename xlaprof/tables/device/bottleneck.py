"""Per device and step: where the step's wall time went, by cause, and which cause bounds it.

Each step window of each device (``steps.step_windows``: its ``Steps`` line, the host's step
markers, its module executions, else the whole capture as one window) is split into classes
that add up to its wall time. Device time first, each class the part of the step its events
cover that no class before it covers (a kernel overlapping a collective on another GPU stream
counts once, as the collective):

1. ``collective_s``: collectives (all-reduce, all-gather, NCCL/RCCL kernels...);
2. ``infeed_outfeed_s``: TPU infeed and outfeed (off-duty to XProf, but what the chip waits on);
3. ``async_wait_s``: waiting on an asynchronous transfer: host-offload copies (TPU memory space
   S(5), host send/recv) and any other ``*-done`` op, the chip stalled until the copy lands;
4. ``input_transfer_s``: host-to-device and device-to-host copies (``MemcpyH2D``/``D2H``):
   the input batch arriving, results leaving;
5. ``compilation_s`` (device part): kernels XLA's GPU compiler runs while compiling (autotune);
6. ``memory_bound_s``: ops on the memory side of the roofline (``ops.bound``; TPU, where the
   chip's peaks are known);
7. ``compute_s``: every other op (matmuls, convolutions, fusions, on-device copies).

Then the time the device is idle, by what the same host was doing then:

8. ``compilation_s`` (host part): a compile span (``COMPILE_EVENTS``, XLA's and JAX's);
9. ``input_s``: a data-input span (``INPUT_EVENT``: tf.data's iterators, PyTorch's DataLoader,
   torch_xla's loaders, a function named like ``load_batch``);
10. ``tracing_s``: on a torch_xla host (lazy-tensor events), the rest: the host was tracing the
    next step (what ``tracing_vs_device`` measures);
11. ``host_s``: elsewhere, the rest: the host did something else (Python, dispatch, launches).

``bottleneck`` names the largest class and ``share`` its part of the step's wall time. A
device's host spans are its own host's; nothing is stitched across hosts or devices.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xlaprof.parse.events import COMPILE_EVENTS, LAZY_TENSOR_EVENTS
from xlaprof.tables import categorical as cols
from xlaprof.tables.device.steps import DeviceGroups, joined
from xlaprof.tables.intervals import Coverage

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


# The classes, in the order they claim time (module docstring); each is a column "<name>_s".
CLASSES = (
    "collective",
    "infeed_outfeed",
    "async_wait",
    "input_transfer",
    "compilation",
    "memory_bound",
    "compute",
    "input",
    "tracing",
    "host",
)
# Classes of device time (busy) and of device idle time (what the host did meanwhile).
DEVICE_CLASSES = CLASSES[:7]
IDLE_CLASSES = CLASSES[7:]

BOTTLENECK_COLUMNS = [
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
    *[f"{name}_s" for name in CLASSES],
    "bottleneck",
    "share",
]

# Host spans that feed the device data: tf.data's iterator ops (IteratorGetNext,
# Iterator::Prefetch, tf_data_iterator_* lines), PyTorch's DataLoader (Kineto's
# "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"), torch_xla's MpDeviceLoader and
# ParallelLoader, and functions named load/get/next/fetch/read + batch (JAX's Python tracer
# names events by function: "$train.py:74 load_batch").
INPUT_EVENT = re.compile(
    r"getnext|iterator::|iterator_get_next|dataloader|data_loader|mpdeviceloader|parallelloader"
    r"|prefetch|input_pipeline|tf_data|(?:load|get|next|fetch|read)_?batch",
    re.IGNORECASE,
)
# ``copy-done.4``, ``all-gather-done``: the done of an async pair (its wait).
_ASYNC_DONE = re.compile(r"-done(?:\.\d+)?$")


def step_bottlenecks(
    events: pd.DataFrame,
    frame: pd.DataFrame,
    windows: pd.DataFrame,
    ops: pd.DataFrame | None = None,
    groups: DeviceGroups | None = None,
) -> pd.DataFrame:
    """One row per device step window: seconds per class, the bottleneck and its share.

    ``frame`` is ``device_events(events)``, ``windows`` ``steps.step_windows(...)`` and ``ops``
    ``device_ops(...)`` (for the roofline side of each op, where known); ``groups`` the
    frame's devices' rows, where the caller has them.
    """
    import numpy as np
    import pandas as pd

    if windows.empty:
        return pd.DataFrame(columns=BOTTLENECK_COLUMNS)
    klass = _device_class(frame, ops)
    host_spans = _host_spans(events)
    groups = DeviceGroups.of(frame) if groups is None else groups
    all_starts, all_ends = frame["start_ns"].to_numpy(), frame["end_ns"].to_numpy()
    starts, ends = windows["start_ns"].to_numpy(), windows["end_ns"].to_numpy()
    # per device (in groupby's order) its windows' positions and new columns; the table is
    # the windows in that order with the columns joined once (no frame per device)
    order: list[np.ndarray] = []
    parts: dict[str, list[Any]] = {}
    names = np.array([*CLASSES, None], dtype=object)
    for (session, host, device), at in groups.windows(windows):
        rows = groups.rows((session, host, device))
        mine = rows[klass[rows] > 0]
        a, b = starts[at], ends[at]
        order.append(at)
        on_host = host_spans.get((str(session), str(host)), _HostSpans())
        key = (session, host, device)
        # the classed events are the compute events: their union is the device's busy union
        busy_union = (
            (groups.busy(key), groups.busy_in(key, a, b))
            if np.array_equal(mine, groups.compute(key))
            else None
        )
        seconds, busy = _class_seconds(
            (all_starts[mine], all_ends[mine], klass[mine]), on_host, (a, b), busy_union
        )
        largest, top = _largest([seconds[name] for name in CLASSES])
        wall = (b - a) / 1e9
        named = np.where(wall > 0, top, len(CLASSES))
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(wall > 0, largest / wall, np.nan)
        used = np.flatnonzero(np.bincount(named, minlength=len(names)))
        remap = np.zeros(len(names), dtype=np.int64)
        remap[used] = np.arange(len(used))
        found = {
            "wall_s": wall,
            "busy_s": busy / 1e9,
            **{f"{name}_s": seconds[name] for name in CLASSES},
            # typed per device, as each device's rows were
            "bottleneck": pd.Series(cols.typed(names[used].tolist(), remap[named])),
            "share": share,
        }
        for name, values in found.items():
            parts.setdefault(name, []).append(values)
    return joined(windows, order, parts, BOTTLENECK_COLUMNS)


def _largest(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the largest of ``columns`` and the index of the first column holding it (the
    rows' ``max`` and ``argmax`` over the columns side by side), column by column without
    copying them into one table; side by side where a value is NaN (which argmax picks)."""
    import numpy as np

    if any(np.isnan(column).any() for column in columns):
        table = np.column_stack(columns)
        return table.max(axis=1), table.argmax(axis=1)
    largest = columns[0].copy()
    top = np.zeros(len(largest), dtype=np.int64)
    for index, column in enumerate(columns[1:], start=1):
        larger = column > largest
        largest = np.where(larger, column, largest)
        top[larger] = index
    return largest, top


def _class_seconds(
    device: tuple[np.ndarray, np.ndarray, np.ndarray],
    on_host: _HostSpans,
    windows: tuple[np.ndarray, np.ndarray],
    busy_union: tuple[Coverage, np.ndarray] | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """One device's seconds per class in each window [a, b) (``windows``; module docstring:
    each class the part no class before it covers), and its busy time (ns). ``device``: its
    classed events' starts, ends and class codes (``_device_class``); ``busy_union``: the
    union of all of them and its length in each window, where the caller has it (a device
    whose events are all of one class needs no other)."""
    import numpy as np

    starts, ends, classes = device
    a, b = windows
    seconds = {name: np.zeros(len(a)) for name in CLASSES}
    present = np.bincount(classes, minlength=len(DEVICE_CLASSES) + 1)[1:] > 0
    # the union of what the classes so far claim: each class's events joined to the union
    # before it (the same union as of all their events, with fewer intervals to order)
    claimed = Coverage.of(starts[:0], ends[:0])
    before = np.zeros(len(a))
    for code, name in enumerate(DEVICE_CLASSES, start=1):
        if not present[code - 1]:
            continue
        if busy_union is not None and present.sum() == 1:  # this class is all of them
            claimed, covered = busy_union
            now = covered.astype(np.float64)
        else:
            chosen = classes == code
            claimed = _joined(claimed, starts[chosen], ends[chosen])
            now = claimed.within(a, b).astype(np.float64)
        seconds[name] += (now - before) / 1e9
        before = now
    busy = before
    for name in ("compilation", "input"):
        if name not in on_host.spans:
            continue
        claimed = _joined(claimed, *on_host.spans[name])
        now = claimed.within(a, b).astype(np.float64)
        seconds[name] += (now - before) / 1e9
        before = now
    rest = np.maximum((b - a) - before, 0) / 1e9
    seconds["tracing" if on_host.lazy else "host"] += rest
    return seconds, busy


def _joined(union: Coverage, starts: np.ndarray, ends: np.ndarray) -> Coverage:
    """The union of ``union`` and the intervals [starts, ends)."""
    import numpy as np

    return Coverage.of(np.concatenate([union.starts, starts]), np.concatenate([union.ends, ends]))


def _device_class(frame: pd.DataFrame, ops: pd.DataFrame | None) -> np.ndarray:
    """Each device event's class: 1 + its index in ``DEVICE_CLASSES``, 0 for events that are
    none. Each test is answered once per distinct category or op, not per event."""
    import numpy as np

    category_codes, categories = cols.coded(frame["category"])

    def category(name: str) -> np.ndarray:
        found = np.array([c == name for c in categories] + [False], dtype=bool)
        rows: np.ndarray = np.take(found, category_codes)
        return rows

    compute = frame["compute"].to_numpy(dtype=bool)
    op_line = frame["op_line"].to_numpy(dtype=bool)
    # one regex per distinct op, not per event
    codes, names = cols.coded(frame["op"])
    done = np.take(
        np.array([bool(_ASYNC_DONE.search(str(n))) for n in names] + [False], bool), codes
    )
    klass = np.zeros(len(frame), dtype=np.int64)

    def mark(rows: np.ndarray, name: str) -> None:
        klass[rows] = DEVICE_CLASSES.index(name) + 1

    mark(compute, "compute")
    if ops is not None and not ops.empty and (ops["bound"] == "memory").any():
        mark(compute & _memory_bound(frame, ops, codes), "memory_bound")
    collective = category("collective")
    mark(compute & category("autotune"), "compilation")
    mark(compute & category("host_transfer"), "input_transfer")
    mark(compute & (category("host_offload") | (done & ~collective)), "async_wait")
    mark(op_line & category("infeed_outfeed"), "infeed_outfeed")
    mark(compute & collective, "collective")
    return klass


def _memory_bound(frame: pd.DataFrame, ops: pd.DataFrame, op_codes: np.ndarray) -> np.ndarray:
    """Which events are of an op on the memory side of the roofline (``ops``' ``bound``), by
    (session, host, device, op) as text, looked up once per distinct key."""
    import numpy as np

    memory = ops[ops["bound"] == "memory"]
    wanted = set(
        zip(
            *(memory[c].astype(str).tolist() for c in ("session", "host", "device", "name")),
            strict=True,
        )
    )
    keys = [cols.codes(frame["session"]), cols.codes(frame["host"]), cols.codes(frame["device"])]
    group, firsts = cols.group_codes([*keys, op_codes])
    distinct = zip(
        *(frame[c].take(firsts).astype(str).tolist() for c in ("session", "host", "device", "op")),
        strict=True,
    )
    hit = np.array([key in wanted for key in distinct], dtype=bool)
    found: np.ndarray = hit[group]
    return found


@dataclass
class _HostSpans:
    """One host's spans by class (``compilation``, ``input``: starts and ends, ns; a class
    without spans is absent) and whether it ran torch_xla's lazy-tensor runtime."""

    lazy: bool = False
    spans: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def _host_spans(events: pd.DataFrame) -> dict[tuple[str, str], _HostSpans]:
    """Per (session, host): its compile spans and data-input spans, and whether it ran
    torch_xla's lazy-tensor runtime."""
    import numpy as np

    # each test once per category; the rows each picks (few) split by host through the codes,
    # no mask of every event per host. A host none of them picks is left out: its lookup's
    # default (not lazy, no spans) is what its entry would say.
    tests = [
        lambda text: text in COMPILE_EVENTS,
        lambda text: bool(INPUT_EVENT.search(text)),
        lambda text: text in LAZY_TENSOR_EVENTS,
    ]
    some, bits = cols.flagged(events["name"], tests)
    on_host = cols.equals_at(events["plane_kind"], "host", some)  # host planes' only
    some, bits = some[on_host], bits[on_host]
    picked = {"compilation": some[(bits & 1) > 0], "input": some[(bits & 2) > 0]}
    lazy = some[(bits & 4) > 0]
    starts, ends = events["start_ns"].to_numpy(), events["end_ns"].to_numpy()
    sessions, hosts = cols.codes(events["session"]), cols.codes(events["host"])
    every = np.concatenate([lazy, *picked.values()])
    every = every[(sessions[every] >= 0) & (hosts[every] >= 0)]  # groupby's: no missing key
    found: dict[tuple[str, str], _HostSpans] = {}
    for first in cols.group_codes([sessions[every], hosts[every]])[1].tolist():
        at = every[first]

        def mine(rows: np.ndarray, at: int = at) -> np.ndarray:
            kept: np.ndarray = rows[(sessions[rows] == sessions[at]) & (hosts[rows] == hosts[at])]
            return kept

        spans = _HostSpans(lazy=bool(len(mine(lazy))))
        for label, rows in picked.items():
            chosen = mine(rows)
            if len(chosen):
                spans.spans[label] = (starts[chosen], ends[chosen])
        found[(str(events["session"].iloc[at]), str(events["host"].iloc[at]))] = spans
    return found


def bottleneck_summary(table: pd.DataFrame, drop_edges: bool = True) -> pd.DataFrame:
    """Per device: its steps' seconds per class summed and as shares of their wall time, and the
    bottleneck over them. With ``drop_edges`` the first and last step of a device with more than
    ``EDGE_STEPS`` steps are left out, as XProf does (a capture starts and stops mid-step)."""
    import pandas as pd

    rows = []
    for (session, host, device), group in table.groupby(
        ["session", "host", "device"], observed=True, sort=True
    ):
        steps = steady_steps(group) if drop_edges else group
        sums = {name: float(steps[f"{name}_s"].sum()) for name in CLASSES}
        row = summary_row(
            (session, host, device), int(steps["step"].notna().sum()), steps["wall_s"].sum(), sums
        )
        if row is not None:
            rows.append(row)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


SUMMARY_COLUMNS = [
    "session",
    "host",
    "device",
    "steps",
    "wall_s",
    *[f"{name}_share" for name in CLASSES],
    "bottleneck",
    "share",
]


def summary_row(
    where: tuple[object, object, object], steps: int, wall: float, sums: dict[str, float]
) -> dict[str, object] | None:
    """One device's row of the bottleneck summary from its steps' seconds per class (``sums``)
    and their wall time: each class's share of the wall and the largest. None when no wall
    time was measured (nothing to divide by). Shared by the in-memory trace and a pod's
    per-device sums, so both tables have one layout and one rule."""
    wall = float(wall)
    if wall <= 0:
        return None
    shares = {name: sums[name] / wall for name in CLASSES}
    top = max(shares, key=shares.__getitem__)
    session, host, device = where
    return {
        "session": session,
        "host": host,
        "device": device,
        "steps": steps,
        "wall_s": wall,
        **{f"{name}_share": share for name, share in shares.items()},
        "bottleneck": top,
        "share": shares[top],
    }


# XProf leaves out the first and last step when a device has more than this many.
EDGE_STEPS = 5


def steady_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """One device's steps without the first and last when it has more than ``EDGE_STEPS``
    (XProf's rule: a capture starts and stops mid-step)."""
    numbered = steps[steps["step"].notna()].sort_values("start_ns")
    if len(numbered) > EDGE_STEPS:
        return numbered.iloc[1:-1]
    return steps


# What can bound a step, in the order ties are broken.
BOUNDS = ("compile", "tracing", "input", "transfer", "device", "host")
# The classes as what bounds a step (``BOUNDS``): the vocabulary of the one step model.
CLASS_BOUNDS = {
    "compilation": "compile",
    "tracing": "tracing",
    "input": "input",
    "input_transfer": "transfer",
    "host": "host",
    "collective": "device",
    "infeed_outfeed": "device",
    "async_wait": "device",
    "memory_bound": "device",
    "compute": "device",
}


def busiest_bounds(
    bottleneck: pd.DataFrame | None, host: str | None = None, ordered: bool = True
) -> pd.DataFrame:
    """Per step of ``host`` (every host if None): the bound of its busiest device's step.

    Columns ``session``, ``host``, ``step``, ``bound``, ``bound_share``; steps with no number
    (a whole capture as one window) are left out. Ordered by session, host and step (with
    ``ordered=False``, in the bottleneck table's order: a lookup needs no sort).
    """
    import numpy as np
    import pandas as pd

    columns = ["session", "host", "step", "bound", "bound_share"]
    if bottleneck is None or bottleneck.empty:
        return pd.DataFrame(columns=columns)
    at = busiest_rows(bottleneck, host)
    if not len(at):
        return pd.DataFrame(columns=columns)
    codes, values = step_bounds(bottleneck, at)
    table = pd.DataFrame(
        {
            **{name: bottleneck[name].take(at).astype(str).array for name in ("session", "host")},
            "step": bottleneck["step"].to_numpy(dtype=np.int64, na_value=0)[at],
            "bound": cols.typed(values, codes),
            "bound_share": bottleneck["share"].to_numpy(dtype=np.float64)[at],
        }
    )
    if not ordered:
        return table
    return table.sort_values(["session", "host", "step"], ignore_index=True)


def busiest_rows(bottleneck: pd.DataFrame, host: str | None = None) -> np.ndarray:
    """The rows (positions, ascending) of ``bottleneck`` that are their step's busiest: one
    per (session, host, step) among the rows with a step number and a bottleneck (of
    ``host``'s steps only, if given), the first of the most busy time on a tie."""
    import numpy as np

    chosen = bottleneck["step"].notna().to_numpy() & bottleneck["bottleneck"].notna().to_numpy()
    if host is not None:
        chosen &= cols.equals(bottleneck["host"], host)
    rows = np.flatnonzero(chosen)
    if not len(rows):
        return rows
    # per step, its busiest row (the first on a tie): the first of its key in the rows
    # ordered by busy time, descending and stable
    keys = [
        cols.codes(bottleneck["session"])[rows],
        cols.codes(bottleneck["host"])[rows],
        bottleneck["step"].to_numpy(dtype=np.int64, na_value=0)[rows],
    ]
    if all(k.min() == k.max() for k in keys[:2]) and (keys[2][1:] > keys[2][:-1]).all():
        return rows  # one session and host, each step once (one device): each is the busiest
    key = cols.group_codes(keys)[0]
    if key.max() + 1 < len(key):  # some step has several devices
        busy = bottleneck["busy_s"].to_numpy(dtype=np.float64)[rows]
        order = np.argsort(-busy, kind="stable")
        rows = rows[np.sort(order[np.unique(key[order], return_index=True)[1]])]
    return rows


def step_bounds(bottleneck: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, list[Any]]:
    """The bound (``CLASS_BOUNDS``, NaN for none) of each of ``bottleneck``'s ``rows``: codes
    into the bounds, one per distinct class (``categorical.coded``'s; a missing class: NaN)."""
    import numpy as np

    codes, named = cols.coded(bottleneck["bottleneck"].take(rows))
    bounds = [CLASS_BOUNDS.get(n, np.nan) for n in named]
    if (codes < 0).any():
        codes = np.where(codes < 0, len(bounds), codes)
        bounds.append(np.nan)
    return codes, bounds
