"""Steps and per-step host tables of captures that have host events only (or mostly).

A capture made without a device (TorchTPU's profiler on a machine without a TPU, the PyTorch
profiler with CPU activity only) still says what the host did in each step, if the steps can
be found. This module finds them and splits them:

**Steps from the ranges users and frameworks mark** (``named_steps``), where no host event
carries a ``step_num`` stat (``xlaprof.steps``, ``xp.StepTrace``, Chrome-trace
``ProfilerStep#N``: those come first, in ``tables.step_numbers``):

- ``ProfilerStep#N`` (the PyTorch profiler's step); in an XSpace the profiler's TraceMe encoding
  drops what follows ``#``, leaving ``ProfilerStep``: those are numbered in capture order;
- ``step_N``, ``user_step_N``, ``train_step N``: a ``record_function`` range named with a step
  number;
- with neither, ``record_function`` ranges the Python tracer saw (the ``__enter__`` of
  ``torch/autograd/profiler.py`` that starts a range, to the next ``__exit__`` on its line): the
  tracer does not record their names, so they are numbered in capture order.

Of several name families the one covering most time is taken (``ProfilerStep#N`` around a user's
``step_N``), on the thread that holds most of its ranges.

**Host time per step** (``host_step_table``): on that thread, each step's wall time split by
what the host did, every nanosecond counted once, in this order of precedence: compiling
(compile spans), reading input (a DataLoader's ``__next__``), waiting (sleep, synchronize, a
device value read), aten ops (dispatch and CPU kernels), Python (Python-tracer functions outside
all of these), other recorded ranges; the rest is time no recorded event covers. A class the
capture has no event of at all is not measured (None), not zero.

**Hottest functions and ops per step** (``host_hot_table``): Python-tracer functions and aten
ops by self time (time minus nested events on the same thread).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xlaprof.model.warmup import first_steady_of
from xlaprof.parse.events import COMPILE_EVENTS, STEP_MARKER

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from xlaprof.model.input import HostActivity
    from xlaprof.model.result import HostView
    from xlaprof.model.trace import Trace
    from xlaprof.parse.dynamo_log import DynamoRecord
    from xlaprof.parse.torch_trace import TorchTraceLog

# ``ProfilerStep#12`` (Chrome traces) and ``ProfilerStep`` (XSpace: the TraceMe name ends at #)
_PROFILER_STEP_RE = re.compile(r"ProfilerStep#(\d{1,18})")
PROFILER_STEP = "ProfilerStep"
# ``step_12``, ``user_step_3``, ``train_step 5``, ``Step#7``: a range named with a step number
# (at most 18 digits: a number that fits int64, whatever a damaged capture holds)
_NUMBERED_STEP_RE = re.compile(r"(?:[A-Za-z][A-Za-z0-9]*[_ ])*step[_ #]?(\d{1,18})", re.IGNORECASE)
# The Python tracer's record_function enter/exit (torch/autograd/profiler.py) and the op that
# starts the range inside the enter.
_RF_ENTER_RE = re.compile(r"\$(?:\S*/)?profiler\.py:\d+ __enter__")
_RF_EXIT_RE = re.compile(r"\$(?:\S*/)?profiler\.py:\d+ __exit__")
_RF_START = "_record_function_enter_new"
# Any name that may take part in marking a step (the rows named_steps looks at further).
_CANDIDATES_RE = re.compile(
    "|".join(
        (
            _PROFILER_STEP_RE.pattern,
            PROFILER_STEP,
            "(?i:" + _NUMBERED_STEP_RE.pattern + ")",
            _RF_ENTER_RE.pattern,
        )
    )
)

HOST_STEP_COLUMNS = [
    "host",
    "step",
    "start_ns",
    "end_ns",
    "wall_ms",
    "compile_ms",
    "read_ms",
    "wait_ms",
    "aten_ms",
    "python_ms",
    "other_ms",
    "unrecorded_ms",
    "gap_after_ms",
]
HOT_COLUMNS = ["host", "step", "kind", "name", "calls", "self_ms"]
# What the host did, in order of precedence (an instant counts for the first that covers it).
CLASSES = ("compile", "read", "wait", "aten", "python", "other")
# Names of host waits: sleeping, synchronizing, reading a device value on the host.
_WAIT_RE = re.compile(
    r"(?:\bsleep\b|synchroniz|_local_scalar_dense|\bwait\b|\.item\b|block_until_ready)",
    re.IGNORECASE,
)
_READ_RE = re.compile(r"DataLoader.*__next__|dataloader\.py:\d+ __next__|__next__.*DataLoader")
# dynamo / inductor / XLA compile spans (PJRT, JAX, torch_xla: parse.events.COMPILE_EVENTS)
_COMPILE_RE = re.compile(
    r"(?:^(?:" + "|".join(map(re.escape, COMPILE_EVENTS)) + r")$"
    r"|_compile\.compile_inner|compile_fx|TorchDynamo.*compile|dynamo_timed|"
    r"convert_frame|_compile\b|backend_compile)",
)
TOP_PER_STEP = 5


@dataclass
class NamedSteps:
    """Steps found from range names: one row per step (host, step, start_ns, end_ns, line)
    and how they were found (for the report)."""

    ranges: pd.DataFrame
    source: str


def named_steps(events: pd.DataFrame) -> NamedSteps | None:
    """The steps the host events' names mark, for hosts whose events carry no ``step_num``
    (see the module docstring); their defining events get ``step_num`` (in place) so later
    tables find the stepping thread. None when no host has such ranges."""
    import pandas as pd

    rows: list[tuple[str, int, int, int, str]] = []
    sources: list[str] = []
    # Only the rows whose names could mark a step (matched on the names' categories: a
    # capture of millions of events is not scanned row by row), and the openers and exits of
    # record_function ranges.
    wanted = matching(events["name"], _CANDIDATES_RE) & (events["plane_kind"] == "host").to_numpy()
    if not wanted.any():
        return None
    hosts = set(events.loc[wanted, "host"].astype(str))
    host_events = events[
        (events["plane_kind"] == "host").to_numpy()
        & events["host"].astype(str).isin(hosts).to_numpy()
    ]
    for host, mine in host_events.groupby("host", observed=True):
        if mine["step_num"].notna().any() or (mine["name"] == STEP_MARKER).any():
            continue  # the capture numbers its own steps, or torch_xla's markers end them
        found = _by_name(mine) or _record_functions(mine)
        if found is None:
            continue
        index, numbers, starts, ends, line, source = found
        events.loc[index, "step_num"] = numbers
        rows += [
            (str(host), int(n), int(a), int(b), line)
            for n, a, b in zip(numbers, starts, ends, strict=True)
        ]
        sources.append(source)
    if not rows:
        return None
    ranges = pd.DataFrame(rows, columns=["host", "step", "start_ns", "end_ns", "line"])
    return NamedSteps(ranges, "; ".join(dict.fromkeys(sources)))


_Found = tuple["pd.Index", "np.ndarray", "np.ndarray", "np.ndarray", str, str]


def _by_name(events: pd.DataFrame) -> _Found | None:
    """Ranges named as steps: the family (name with its number taken out) covering most time,
    on its busiest line."""
    import numpy as np

    names = events["name"].astype(str)
    profiler = names.str.fullmatch(_PROFILER_STEP_RE.pattern)
    bare = names == PROFILER_STEP
    numbered = names.str.fullmatch(_NUMBERED_STEP_RE.pattern, case=False) & ~profiler
    candidates = events[profiler | bare | numbered]
    if candidates.empty:
        return None
    family = candidates["name"].astype(str).str.replace(r"\d+", "N", regex=True)
    totals = candidates.groupby(family)["duration_ns"].sum()
    chosen_family = str(totals.idxmax())
    chosen = candidates[family == chosen_family]
    line = str(chosen["line"].astype(str).value_counts().idxmax())
    chosen = chosen[chosen["line"].astype(str) == line].sort_values("start_ns", kind="stable")
    starts = chosen["start_ns"].to_numpy(np.int64)
    ends = chosen["end_ns"].to_numpy(np.int64)
    if chosen_family == PROFILER_STEP:
        numbers = np.arange(len(chosen), dtype=np.int64)
        source = (
            f"{len(chosen)} ProfilerStep ranges (numbered in capture order: the XSpace keeps "
            "no step number after '#')"
        )
    else:
        digits = chosen["name"].astype(str).str.extract(r"(\d+)\D*$")[0]
        numbers = np.array([int(d) for d in digits], np.int64)
        source = f"{len(chosen)} '{chosen_family}' ranges"
    return chosen.index, numbers, starts, ends, line, source


def _record_functions(events: pd.DataFrame) -> _Found | None:
    """record_function ranges the Python tracer saw: each enter that starts a range, to the
    next exit on its line (see the module docstring)."""
    import numpy as np

    names = events["name"].astype(str)
    enters = events[names.str.fullmatch(_RF_ENTER_RE.pattern)]
    if enters.empty:
        return None
    line = str(enters["line"].astype(str).value_counts().idxmax())
    same = events[events["line"].astype(str) == line]
    same_names = same["name"].astype(str)
    openers = same[same_names.str.endswith(_RF_START)]["start_ns"].to_numpy(np.int64)
    exits = same[same_names.str.fullmatch(_RF_EXIT_RE.pattern)].sort_values("start_ns")
    exit_starts = exits["start_ns"].to_numpy(np.int64)
    exit_ends = exits["end_ns"].to_numpy(np.int64)
    mine = enters[enters["line"].astype(str) == line].sort_values("start_ns", kind="stable")
    index, starts, ends = [], [], []
    for row, start, end in zip(mine.index, mine["start_ns"], mine["end_ns"], strict=True):
        opened = np.searchsorted(openers, start, side="left")
        if opened >= len(openers) or openers[opened] > end:
            continue  # an __enter__ of another profiler.py context manager
        after = np.searchsorted(exit_starts, end, side="left")
        if after >= len(exit_starts):
            continue  # the range did not close inside the capture
        index.append(row)
        starts.append(int(start))
        ends.append(int(exit_ends[after]))
    if not index:
        return None
    source = (
        f"{len(index)} record_function ranges seen by the Python tracer (numbered in capture "
        "order: the tracer does not record their names)"
    )
    import pandas as pd

    return (
        pd.Index(index),
        np.arange(len(index), dtype=np.int64),
        np.array(starts, np.int64),
        np.array(ends, np.int64),
        line,
        source,
    )


def matching(names: pd.Series, pattern: re.Pattern[str]) -> np.ndarray:
    """Which rows' names match ``pattern`` whole (a categorical column: matched once per
    category, then spread to rows by code)."""
    import numpy as np
    import pandas as pd

    if isinstance(names.dtype, pd.CategoricalDtype):
        categories = pd.Index(names.cat.categories).astype(str)
        hit = np.flatnonzero(categories.str.fullmatch(pattern.pattern))
        return np.isin(names.cat.codes.to_numpy(), hit)
    return names.astype(str).str.fullmatch(pattern.pattern).to_numpy(dtype=bool)


# -- host time per step -------------------------------------------------------------------


def event_class(names: pd.Series, categories: pd.Series | None = None) -> pd.Series:
    """What each host event is (``CLASSES``), from its name (and Kineto ``cat``)."""
    import numpy as np
    import pandas as pd

    text = names.astype(str)
    result = np.full(len(text), "other", dtype=object)
    python = text.str.startswith("$")
    if categories is not None:
        python |= categories.fillna("").astype(str).eq("python_function").to_numpy()
    result[python.to_numpy()] = "python"
    result[text.str.startswith("aten::").to_numpy()] = "aten"
    result[text.str.contains(_WAIT_RE.pattern, regex=True, case=False).to_numpy()] = "wait"
    result[text.str.contains(_READ_RE.pattern, regex=True).to_numpy()] = "read"
    result[text.str.contains(_COMPILE_RE.pattern, regex=True).to_numpy()] = "compile"
    return pd.Series(result, index=names.index)


def stepping_events(events: pd.DataFrame, ranges: pd.DataFrame) -> pd.DataFrame:
    """The host events on each host's stepping thread (the line of its step ranges), with a
    ``class`` column, the step-defining events themselves left out."""
    import pandas as pd

    parts = []
    for host, line in ranges.groupby("host")["line"].first().items():
        mine = events[
            (events["plane_kind"] == "host")
            & (events["host"].astype(str) == str(host))
            & (events["line"].astype(str) == str(line))
            & events["step_num"].isna()
        ]
        parts.append(mine)
    chosen = pd.concat(parts) if parts else events.iloc[:0]
    categories = None
    if "args" in chosen.columns:
        from xlaprof.parse.xplane.args import stat_values

        cats = stat_values(chosen["args"], "cat")
        categories = pd.Series(cats, index=chosen.index, dtype=object)
    chosen = chosen.assign(**{"class": event_class(chosen["name"], categories)})
    return chosen


def host_step_table(events: pd.DataFrame, ranges: pd.DataFrame) -> pd.DataFrame:
    """Per host step, milliseconds by what the host did (``HOST_STEP_COLUMNS``); see the
    module docstring. ``ranges``: host, step, start_ns, end_ns, line."""
    import numpy as np
    import pandas as pd

    from xlaprof.tables.intervals import Coverage

    mine = stepping_events(events, ranges)
    frames = []
    for host, steps in ranges.groupby("host", sort=False):
        steps = steps.sort_values("start_ns")
        a = steps["start_ns"].to_numpy(np.int64)
        b = steps["end_ns"].to_numpy(np.int64)
        on_host = mine[mine["host"].astype(str) == str(host)]
        table = pd.DataFrame(
            {"host": str(host), "step": steps["step"].to_numpy(), "start_ns": a, "end_ns": b}
        )
        table["wall_ms"] = (b - a) / 1e6
        covered = np.zeros(len(a), np.float64)
        # each class's own time: what it and the classes before it cover, less what those
        # before it cover (so an instant counts once, for the first class covering it)
        starts, ends = np.zeros(0, np.int64), np.zeros(0, np.int64)
        for name in CLASSES:
            of = on_host[on_host["class"] == name]
            if of.empty:
                table[f"{name}_ms"] = np.nan  # no event of this kind anywhere: not measured
                continue
            before = Coverage.of(starts, ends).within(a, b)
            starts = np.concatenate([starts, of["start_ns"].to_numpy(np.int64)])
            ends = np.concatenate([ends, of["end_ns"].to_numpy(np.int64)])
            own = Coverage.of(starts, ends).within(a, b) - before
            table[f"{name}_ms"] = own / 1e6
            covered += own
        table["unrecorded_ms"] = np.maximum((b - a) - covered, 0) / 1e6
        gaps = np.append(a[1:] - b[:-1], np.nan).astype(np.float64) / 1e6
        table["gap_after_ms"] = gaps
        frames.append(table)
    if not frames:
        return pd.DataFrame(columns=HOST_STEP_COLUMNS)
    return pd.concat(frames, ignore_index=True)[HOST_STEP_COLUMNS]


def host_hot_table(
    events: pd.DataFrame, ranges: pd.DataFrame, top: int = TOP_PER_STEP
) -> pd.DataFrame:
    """Per host step, its ``top`` Python functions and aten ops by self time (``HOT_COLUMNS``)."""
    import numpy as np
    import pandas as pd

    from xlaprof.tables.intervals import self_times_ns

    mine = stepping_events(events, ranges)
    mine = mine[mine["step"].notna()] if "step" in mine.columns else mine.iloc[:0]
    if mine.empty:
        return pd.DataFrame(columns=HOT_COLUMNS)
    own = self_times_ns(mine["start_ns"].to_numpy(np.int64), mine["end_ns"].to_numpy(np.int64))
    kinds = mine["class"].where(mine["class"].isin(["python", "aten"]))
    table = pd.DataFrame(
        {
            "host": mine["host"].astype(str).to_numpy(),
            "step": mine["step"].astype("int64").to_numpy(),
            "kind": kinds.to_numpy(),
            "name": mine["name"].astype(str).to_numpy(),
            "self_ns": own,
        }
    ).dropna(subset=["kind"])
    grouped = (
        table.groupby(["host", "step", "kind", "name"], sort=False)["self_ns"]
        .agg(calls="count", self_ns="sum")
        .reset_index()
        .sort_values(["host", "step", "kind", "self_ns"], ascending=[True, True, True, False])
    )
    grouped = grouped.groupby(["host", "step", "kind"], sort=False).head(top)
    grouped["self_ms"] = grouped.pop("self_ns") / 1e6
    return grouped[HOT_COLUMNS].reset_index(drop=True)


# -- the whole of it, for a capture ---------------------------------------------------------


def step_ranges_of(trace: Trace) -> pd.DataFrame | None:
    """The trace's host steps as ranges (host, step, start_ns, end_ns, line): those found from
    names, else its step bounds on the line of its ``step_num`` markers; None without steps."""
    import pandas as pd

    if trace.step_ranges is not None:
        return trace.step_ranges
    bounds = trace.step_bounds
    if bounds is None or bounds.empty:
        return None
    events = trace.events
    marked = events[(events["plane_kind"] == "host") & events["step_num"].notna()]
    if marked.empty:
        return None  # StepMarker-ended steps: torch_xla's own tables read those
    lines = marked.groupby(marked["host"].astype(str))["line"].agg(
        lambda line: str(line.astype(str).value_counts().idxmax())
    )
    ranges = bounds.assign(host=bounds["host"].astype(str))
    ranges = ranges[ranges["host"].isin(lines.index)]
    ranges = ranges.assign(line=ranges["host"].map(lines))
    return pd.DataFrame(ranges[["host", "step", "start_ns", "end_ns", "line"]])


def host_activity(trace: Trace) -> HostActivity | None:
    """The host's time per step and hottest functions of a capture without device planes
    (``HostActivity``), or None (a capture with devices, a pod read lazily, no steps)."""
    from xlaprof.model.input import HostActivity

    device_planes = trace.devices is not None and len(trace.devices) > 0
    # devices with work (a JAX CPU client's thread counts: the device model reads it)
    summary = trace.device_summary
    devices_at_work = summary is not None and not summary.utilization.empty
    # a pod's events stay in its hosts' caches: not read again for this
    events = trace.events_source.held_events()
    if device_planes or devices_at_work or events.empty:
        return None
    ranges = step_ranges_of(trace)
    if ranges is None or ranges.empty:
        return None
    source = trace.step_source or "the capture's own step markers"
    return HostActivity(
        source=source,
        steps=host_step_table(events, ranges),
        hot=host_hot_table(events, ranges),
        device_planes=device_planes,
    )


def place_compiles(
    records: list[DynamoRecord], logs: list[TorchTraceLog], trace: Trace
) -> list[DynamoRecord]:
    """``records`` with each TORCH_TRACE compile given the step of the capture it started in,
    where the capture's clock is tied to the epoch (``Trace.epoch_offset_ns``): new records
    where a step was placed, the loaded ones left as they were."""
    import dataclasses

    import numpy as np

    if not logs or not trace.epoch_offset_ns or trace.step_bounds is None:
        return records
    host, offset = next(iter(trace.epoch_offset_ns.items()))
    bounds = trace.step_bounds
    bounds = bounds[bounds["host"].astype(str) == host].sort_values("start_ns")
    if bounds.empty:
        return records
    starts = bounds["start_ns"].to_numpy(np.int64)
    ends = bounds["end_ns"].to_numpy(np.int64)
    numbers = bounds["step"].to_numpy(np.int64)
    steps: dict[str, int] = {}
    for compile_ in logs[0].compiles:
        if compile_.start_s is None:
            continue
        at = round(compile_.start_s * 1e9) - offset
        index = int(np.searchsorted(starts, at, side="right")) - 1
        if index >= 0 and at <= ends[index]:
            steps[compile_.compile_id] = int(numbers[index])
    return [
        dataclasses.replace(record, step=steps[record.compile_id])
        if record.compile_id in steps
        else record
        for record in records
    ]


def read_spans(events: pd.DataFrame, steps: set[int]) -> dict[str, float]:
    """Milliseconds per read event name (``read`` class) over ``steps``, largest first."""
    if "step" not in events.columns:
        return {}
    mine = events[(events["plane_kind"] == "host") & events["step"].isin(list(steps))]
    names = mine["name"].astype(str)
    reads = mine[names.str.contains(_READ_RE.pattern, regex=True)]
    totals = reads.groupby(reads["name"].astype(str))["duration_ns"].sum() / 1e6
    ordered = totals.sort_values(ascending=False).head(5)
    return {str(name): round(float(ms), 3) for name, ms in ordered.items()}


def with_host_compiles(
    timeline: pd.DataFrame, activity: HostActivity | None, host: str
) -> pd.DataFrame:
    """``timeline`` with each step's ``compile_s`` the host table's (``activity``, its rows of
    ``host``: the host the timeline reads) where the timeline did not measure it.

    A capture without the lazy-tensor runtime's or a PJRT client's compile spans (the PyTorch
    profiler around ``torch.compile``) leaves the timeline's compiles unmeasured, while its
    host table measures them from dynamo's and inductor's own spans: the step model then
    takes them from there, so a step that compiled is neither steady in the story nor in the
    host table's median, as it is not in the analyzers' (``shared.host_steps.steady``). A
    compile the timeline measured is kept; a step the host table does not have, or whose
    compiling it did not measure (no compile span in the capture at all), stays unmeasured."""
    if activity is None or timeline.empty or "compile_s" not in timeline:
        return timeline
    table = activity.steps
    mine = table[(table["host"].astype(str) == host) & table["compile_ms"].notna()]
    seconds = dict(zip(mine["step"].astype(int), mine["compile_ms"] / 1e3, strict=True))
    filled = timeline["compile_s"].fillna(timeline["step"].map(seconds)).astype("float64")
    if filled.equals(timeline["compile_s"]):
        return timeline
    out = timeline.copy()
    out["compile_s"] = filled
    return out


# The columns of the host table that split a step's time (HOST_STEP_COLUMNS after the range).
SPLIT_COLUMNS = HOST_STEP_COLUMNS[4:]
# Names the reports show per kind (python, aten) of the hottest over the steady steps.
TOP_HOTTEST = 5


def host_view(activity: HostActivity, timeline: pd.DataFrame | None, warmup_steps: int) -> HostView:
    """What the reports show of ``activity`` (``HostView``): the steady steps and their median
    as the step model counts them (the timeline's ``steady`` steps after warm-up and its step
    of median wall time: the story's), so the host table agrees with the story; without a
    timeline, every step after warm-up and no median. The hottest Python functions and aten ops
    are their mean self time over those steady steps."""
    from xlaprof.model.result import HostView
    from xlaprof.tables.timeline import steady_median

    steps = activity.steps
    median: int | None = None
    # warm-up as the story counts it: the first steps by position (``model.warmup``)
    if timeline is None or timeline.empty:
        first = first_steady_of(steps, warmup_steps, "compile_ms")
    else:
        first = first_steady_of(timeline, warmup_steps, "compile_s")
    if timeline is None or timeline.empty:
        steady = steps[steps["step"] >= first]["step"]
    else:
        chosen = timeline[timeline["step"] >= first]
        if "steady" in chosen:
            chosen = chosen[chosen["steady"].astype(bool)]
        row, count = steady_median(timeline, warmup_steps)
        median = int(row["step"]) if count else None
        steady = steps[steps["step"].isin(chosen["step"])]["step"]
    steady_steps = [int(s) for s in steady]
    hot = activity.hot[activity.hot["step"].isin(steady_steps)]
    hottest: dict[str, dict[str, float]] = {}
    for kind in ("python", "aten"):
        mine = hot[hot["kind"] == kind]
        if mine.empty:
            continue
        totals = mine.groupby("name")["self_ms"].sum().sort_values(ascending=False)
        hottest[kind] = {
            str(name): float(total) / len(steady_steps)
            for name, total in totals.head(TOP_HOTTEST).items()
        }
    return HostView(
        source=activity.source,
        device_planes=activity.device_planes,
        measured=[c for c in SPLIT_COLUMNS if steps[c].notna().any()],
        warmup_steps=[int(s) for s in steps[steps["step"] < first]["step"]],
        steady_steps=steady_steps,
        median_step=median,
        hottest=hottest,
    )
