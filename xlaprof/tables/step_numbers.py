"""Step numbers for trace events, and each host step's bounds.

On host planes, events that carry a ``step_num`` stat (``xlaprof.step``, ``xp.StepTrace``) define
steps; otherwise each torch_xla ``StepMarker`` (one per ``torch_xla.sync()``) ends a step. On
device planes, each plane's own "Steps" line defines them (never another device's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xlaprof.parse.events import STEP_MARKER, STEPS_LINE
from xlaprof.tables import categorical as cols

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


def assign_steps(
    events: pd.DataFrame,
    first_step: int,
    profile_starts: dict[str, int | None] | None = None,
    ranges: pd.DataFrame | None = None,
) -> tuple[pd.arrays.IntegerArray, pd.DataFrame]:
    """A step number for every event (or <NA>), and each host step's bounds.

    The numbers are ``Int32`` where every one fits (as a step count does), else ``Int64``: a
    1 GB host's 46 M events hold 175 MB less.

    See the module docstring for how steps are found. The first StepMarker-defined step begins
    when profiling began (``profile_starts``), since host time before the first marker may hold
    no events at all. ``ranges`` (host, step, start_ns, end_ns: ``tables.host_steps``) are the
    steps of hosts whose step-marking events do not span their steps themselves.
    """
    import numpy as np

    steps = np.full(len(events), -1, dtype=np.int64)
    # each host's bounds as columns: its name, then its steps' numbers, starts and ends
    bounds: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = []
    start_ns = events["start_ns"].to_numpy()
    end_ns = events["end_ns"].to_numpy()
    step_num = events["step_num"].array
    numbered = ~np.asarray(step_num.isna(), dtype=bool)
    # planes by code (a categorical's codes; never a million strings)
    plane_codes = cols.codes(events["plane"])
    on_steps_line = cols.equals(events["line"], STEPS_LINE)
    on_device = cols.equals(events["plane_kind"], "device")
    on_host_plane = cols.equals(events["plane_kind"], "host")
    step_labels = None
    for host in events["host"].cat.categories:
        on_host = cols.equals(events["host"], host)
        host_plane = on_host & on_host_plane
        marked = host_plane & numbered
        given = None if ranges is None else ranges[ranges["host"].astype(str) == str(host)]
        if given is not None and len(given):
            _in_ranges(start_ns, steps, host_plane, given)
            bounds.append(
                (host, *(given[c].to_numpy(np.int64) for c in ("step", "start_ns", "end_ns")))
            )
        elif marked.any():
            at = np.flatnonzero(marked)
            labels = np.asarray(step_num.take(at).to_numpy(dtype="int64"))
            _by_intervals(start_ns, end_ns, steps, host_plane, at, labels)
            bounds.append((host, labels, start_ns[at], end_ns[at]))
        else:
            markers = host_plane & cols.equals(events["name"], STEP_MARKER)
            ends = np.sort(end_ns[markers])
            if len(ends):
                # (the step numbers made in place: no row-long copies of the indices)
                index = np.searchsorted(ends, start_ns, side="left")
                inside = host_plane & (index < len(ends))
                index += first_step
                np.copyto(steps, index, where=inside)
                del index
                begin = int(start_ns[host_plane].min())
                start = (profile_starts or {}).get(str(host))
                if start is not None and start <= begin:
                    begin = int(start)
                previous = np.concatenate([[begin], ends[:-1]]).astype(np.int64)
                numbers = first_step + np.arange(len(ends), dtype=np.int64)
                bounds.append((host, numbers, previous, ends.astype(np.int64)))
        # Each device plane's own Steps line numbers that plane's events: steps are never
        # stitched across devices (two GPUs' steps overlap in time but are not one step).
        device = on_host & on_device
        for plane in np.unique(plane_codes[device & on_steps_line]).tolist():
            scope = device & (plane_codes == plane)
            if step_labels is None:  # the Steps events' names are their step numbers
                step_labels = cols.numbers(events["name"])
            at = np.flatnonzero(scope & on_steps_line)
            _by_intervals(start_ns, end_ns, steps, scope, at, step_labels[at])
    return _step_column(steps), _bounds_frame(bounds)


def _step_column(steps: np.ndarray) -> pd.arrays.IntegerArray:
    """Each event's step (-1: none) as a nullable column: ``Int32`` where every step fits (4
    bytes an event less), else ``Int64``."""
    import numpy as np
    import pandas as pd

    missing = steps < 0
    if int(steps.max(initial=0)) <= np.iinfo(np.int32).max:
        steps = steps.astype(np.int32)
    return pd.arrays.IntegerArray(steps, missing)


def _bounds_frame(bounds: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]) -> pd.DataFrame:
    """The hosts' step bounds as one table (host, step, start_ns, end_ns), built from columns:
    each host's name repeated (a categorical of the names, sorted, as ``astype("category")``
    makes of them), its numbers and times as int64 (what a row per step gave)."""
    import numpy as np
    import pandas as pd

    columns = ["host", "step", "start_ns", "end_ns"]
    if not any(len(numbers) for _, numbers, _, _ in bounds):
        frame = pd.DataFrame([], columns=columns)
        frame["host"] = frame["host"].astype("category")
        return frame
    counts = [len(b[1]) for b in bounds]
    hosts = [host for host, *_ in bounds]
    if all(isinstance(host, str) for host in hosts):
        names = sorted({host for host, count in zip(hosts, counts, strict=True) if count})
        position = {name: at for at, name in enumerate(names)}
        codes = np.repeat([position.get(host, -1) for host in hosts], counts)
        data: dict[str, Any] = {"host": pd.Categorical.from_codes(codes, pd.Index(names))}
    else:  # typed as pandas types the list of names, then its categories
        data = {"host": pd.Series(cols.repeated(hosts, counts)).astype("category")}
    for at, name in enumerate(columns[1:], start=1):
        data[name] = np.concatenate([np.asarray(b[at], dtype=np.int64) for b in bounds])
    return pd.DataFrame(data, columns=columns)


def _in_ranges(
    event_starts: np.ndarray, steps: np.ndarray, scope: np.ndarray, ranges: pd.DataFrame
) -> None:
    """Give each event in ``scope`` the step of the range (``ranges``) its start lies in."""
    import numpy as np

    order = np.argsort(ranges["start_ns"].to_numpy(np.int64), kind="stable")
    starts = ranges["start_ns"].to_numpy(np.int64)[order]
    ends = ranges["end_ns"].to_numpy(np.int64)[order]
    numbers = ranges["step"].to_numpy(np.int64)[order]
    rows, index = _inside(starts, ends, event_starts, scope)
    steps[rows] = numbers[index]


def _by_intervals(
    event_starts: np.ndarray,
    event_ends: np.ndarray,
    steps: np.ndarray,
    scope: np.ndarray,
    definers: np.ndarray,
    labels: np.ndarray,
) -> None:
    """Give each event in ``scope`` the label of the defining interval that contains it
    (``definers``: the defining events' rows; ``labels``: theirs, integers, or floats where NaN
    is none)."""
    import numpy as np

    starts = event_starts[definers]
    ends = event_ends[definers]
    order = np.argsort(starts)
    starts, ends, values = starts[order], ends[order], labels[order]
    # each interval's label as an integer, converted once per interval, not per event
    known = ~np.isnan(values) if values.dtype.kind == "f" else np.ones(len(values), bool)
    numbers = np.where(known, values, 0).astype(np.int64)
    rows = None if scope.all() else np.flatnonzero(scope)
    at = event_starts if rows is None else event_starts[rows]
    if len(at) > 4 * len(starts) and not (at[1:] < at[:-1]).any():
        _in_order(starts, ends, (numbers, known), at, rows, steps)
        return
    target, index = _inside(starts, ends, event_starts, scope)
    if not known.all():
        labelled = known[index]
        target, index = target[labelled], index[labelled]
    steps[target] = numbers[index]


def _in_order(
    starts: np.ndarray,
    ends: np.ndarray,
    labels: tuple[np.ndarray, np.ndarray],
    at: np.ndarray,
    rows: np.ndarray | None,
    steps: np.ndarray,
) -> None:
    """``_by_intervals``' assignment where the events' starts ``at`` (the events at ``rows``,
    None: all) are in order: each interval's events are a run of them (``_run_bounds``), so
    each known interval's number is set over its run in place, with no lookup per event and
    no row-long array (numbers laid out per event, 8 bytes each, and a mask). A loop over the
    intervals: the caller takes this way only where there are four events or more to an
    interval. ``labels``: the intervals' numbers and whether each is known (an unknown one
    numbers nothing)."""
    numbers, known = labels
    begin, stop = _run_bounds(starts, ends, at)
    runs = zip(begin[known].tolist(), stop[known].tolist(), numbers[known].tolist(), strict=True)
    for first, last, number in runs:
        if rows is None:
            steps[first:last] = number
        else:
            steps[rows[first:last]] = number


def _inside(
    starts: np.ndarray, ends: np.ndarray, event_starts: np.ndarray, scope: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The events in ``scope`` that start inside an interval (``starts`` sorted, ``ends``): the
    last one starting at or before the event, that ends at or after its start; and that
    interval's index. Only the events in scope are looked up (every event, when the scope is
    all of them, without gathering them).

    Events in start order (a decoded capture's are) are matched by merging: each interval's
    events are a run of them, found by two searches per interval rather than one per event."""
    import numpy as np

    if not len(starts):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    rows = None if scope.all() else np.flatnonzero(scope)
    at = event_starts if rows is None else event_starts[rows]
    if len(at) > 4 * len(starts) and not (at[1:] < at[:-1]).any():
        first, index = _runs(starts, ends, at)
        chosen = first if rows is None else rows[first]
        return chosen, index
    index = np.searchsorted(starts, at, "right") - 1
    inside = (index >= 0) & (at <= ends[np.maximum(index, 0)])
    chosen = np.flatnonzero(inside) if rows is None else rows[inside]
    return chosen, index[inside]


def _runs(starts: np.ndarray, ends: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_inside`` for sorted event starts ``at``: interval i's events are those from the first
    starting at or after its start, before the next interval's (the last of equal starts takes
    them), up to the last starting at or before its end. Their positions, and i for each."""
    import numpy as np

    begin, stop = _run_bounds(starts, ends, at)
    lengths = stop - begin
    offsets = np.cumsum(lengths) - lengths
    chosen = np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(begin - offsets, lengths)
    return chosen, np.repeat(np.arange(len(starts), dtype=np.int64), lengths)


def _run_bounds(
    starts: np.ndarray, ends: np.ndarray, at: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per interval (``starts`` sorted, ``ends``), its run of the sorted event starts ``at``:
    positions [begin, stop), the events it holds (``_runs``); the runs follow each other."""
    import numpy as np

    begin = np.searchsorted(at, starts, "left")
    following = np.append(begin[1:], len(at))
    stop = np.minimum(np.maximum(np.searchsorted(at, ends, "right"), begin), following)
    return begin, stop
