"""Per device and step: wall, busy, idle, duty and seconds per category; and per device over the
capture (utilization). How steps are found is in ``xlaprof.tables.device``'s docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xlaprof.parse.events import MODULES_LINE, STEPS_LINE
from xlaprof.tables import categorical as cols
from xlaprof.tables.device.categories import CATEGORIES
from xlaprof.tables.device.events import device_events
from xlaprof.tables.intervals import Coverage

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


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


WINDOW_COLUMNS = ["session", "host", "device", "kind", "step", "step_source", "start_ns", "end_ns"]


def step_windows(
    events: pd.DataFrame,
    frame: pd.DataFrame,
    host_bounds: pd.DataFrame | None,
    groups: DeviceGroups | None = None,
) -> pd.DataFrame:
    """Each device's step windows: session, host, device, kind, step, step_source, start, end.

    ``frame`` is ``device_events(events)``; ``host_bounds`` the host step bounds
    (``Trace.step_bounds``: session?, host, step, start_ns, end_ns); ``groups`` its devices'
    rows, where the caller has them.
    """
    import numpy as np
    import pandas as pd

    columns: dict[str, Any] = {name: [] for name in WINDOW_COLUMNS}
    counts: list[int] = []  # the windows of each device: its key is repeated, not listed
    kinds = _kinds(frame)
    of_host: dict[tuple[str, str], pd.DataFrame | None] = {}
    lines = _WindowLines.of(frame)
    groups = DeviceGroups.of(frame) if groups is None else groups
    for (session, host, device), rows in groups.groups:
        key = (str(session), str(host))
        if key not in of_host:
            of_host[key] = _host_bounds_of(host_bounds, session, host)
        found = lines.windows(frame, rows, of_host[key])
        if found is None:
            continue
        steps, source, spans = found
        for name, value in zip(
            WINDOW_COLUMNS[:4], (session, host, device, str(kinds[rows[0]])), strict=True
        ):
            columns[name].append(value)
        columns["step_source"].append(source)
        counts.append(len(steps))
        columns["step"].append(steps)
        columns["start_ns"].append(spans[0])
        columns["end_ns"].append(spans[1])
    # built as columns (no tuple per window); no window: the empty table as it always was
    if sum(counts):
        for name in ("session", "host", "device", "kind", "step_source"):
            columns[name] = cols.repeated(columns[name], counts)
        for name in ("start_ns", "end_ns"):
            columns[name] = np.concatenate(columns[name])
        # numbers joined as one array where every device's are an array (else as a list:
        # None for a whole-capture window, typed as pandas types the list)
        parts = columns["step"]
        columns["step"] = (
            np.concatenate(parts)
            if all(isinstance(p, np.ndarray) for p in parts)
            else [n for p in parts for n in (p.tolist() if isinstance(p, np.ndarray) else p)]
        )
        windows = pd.DataFrame(columns, columns=WINDOW_COLUMNS)
    else:
        windows = pd.DataFrame([], columns=WINDOW_COLUMNS)
    windows["step"] = windows["step"].astype("Int64")
    windows["start_ns"] = windows["start_ns"].astype("int64")
    windows["end_ns"] = windows["end_ns"].astype("int64")
    return windows


def _kinds(frame: pd.DataFrame) -> Any:
    """Each device event's kind, read per row as ``kinds[row]`` (no array of every row's
    text is made)."""
    import numpy as np

    codes, names = cols.coded(frame["kind"])
    values = np.array([*names, np.nan], dtype=object)

    class _Kinds:
        def __getitem__(self, row: int) -> object:
            return values[codes[row]]

    return _Kinds()


@dataclass
class _WindowLines:
    """The device events' columns ``step_windows`` reads, as arrays (read once)."""

    steps_line: np.ndarray
    modules_line: np.ndarray
    compute: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    @classmethod
    def of(cls, frame: pd.DataFrame) -> _WindowLines:
        return cls(
            cols.equals(frame["line"], STEPS_LINE),
            cols.equals(frame["line"], MODULES_LINE),
            frame["compute"].to_numpy(dtype=bool),
            frame["start_ns"].to_numpy(),
            frame["end_ns"].to_numpy(),
        )

    def windows(
        self, frame: pd.DataFrame, rows: np.ndarray, host_steps: pd.DataFrame | None
    ) -> tuple[list[Any] | np.ndarray, str, tuple[np.ndarray, np.ndarray]] | None:
        """One device's (its ``rows`` of ``frame``) windows: their numbers (an array of
        integers, or a list), their source and their starts and ends; None where it has none
        (no compute event)."""
        import numpy as np
        import pandas as pd

        starts, ends = self.starts, self.ends
        steps_line = rows[self.steps_line[rows]]
        if len(steps_line):
            spans = (starts[steps_line], ends[steps_line])
            return _step_numbers(frame.iloc[steps_line]), "Steps line", spans
        if host_steps is not None and len(host_steps):
            spans = (
                host_steps["start_ns"].to_numpy(np.int64),
                host_steps["end_ns"].to_numpy(np.int64),
            )
            return host_steps["step"].to_numpy(np.int64), "host steps", spans
        modules = rows[self.modules_line[rows]]
        if len(modules):
            spans_of = pd.DataFrame({"start_ns": starts[modules], "end_ns": ends[modules]})
            ordered = spans_of.sort_values("start_ns")  # as the table always ordered them
            spans = (ordered["start_ns"].to_numpy(), ordered["end_ns"].to_numpy())
            return np.arange(len(modules)), "module executions", spans
        busy = rows[self.compute[rows]]
        if len(busy):
            spans = (starts[busy].min(keepdims=True), ends[busy].max(keepdims=True))
            return [None], "whole capture", spans
        return None


def _step_numbers(steps_line: pd.DataFrame) -> list[int]:
    """A number per event of a device's ``Steps`` line: its name when that is a number, else
    its ``group_id`` (the column: the same whether or not the frame has ``args``; from
    ``args`` in a frame made without the column), else its position."""
    import pandas as pd

    if "group_id" in steps_line:
        groups = [None if pd.isna(g) else g for g in steps_line["group_id"].tolist()]
    elif "args" in steps_line:
        from xlaprof.parse.xplane.args import stat_values

        groups = stat_values(steps_line["args"], "group_id").tolist()
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
    """The host steps of ``host`` in ``session`` (compared as text; a table without sessions:
    the host's), one mask over the table (a categorical's tested per category)."""
    if host_bounds is None or host_bounds.empty:
        return None
    mine = cols.equals(host_bounds["host"], host)
    if "session" in host_bounds.columns:
        mine &= cols.equals(host_bounds["session"], session)
    return host_bounds[mine]


def device_steps(
    events: pd.DataFrame,
    host_bounds: pd.DataFrame | None = None,
    frame: pd.DataFrame | None = None,
    windows: pd.DataFrame | None = None,
    groups: DeviceGroups | None = None,
) -> pd.DataFrame:
    """One row per device and step: wall, busy, idle (s), duty and seconds per category
    (``groups``: the frame's devices' rows, where the caller has them)."""
    import numpy as np
    import pandas as pd

    frame = device_events(with_session(events)) if frame is None else frame
    if windows is None:
        windows = step_windows(events, frame, host_bounds)
    groups = DeviceGroups.of(frame) if groups is None else groups
    timed = groups.timed
    # per device (in groupby's order) its windows' positions and new columns as arrays; the
    # table is the windows in that order with the columns joined once (no frame per device)
    order: list[np.ndarray] = []
    parts: dict[str, list[np.ndarray]] = {}
    starts = windows["start_ns"].to_numpy()
    ends = windows["end_ns"].to_numpy()
    for key, at in groups.windows(windows):
        mine = groups.compute(key)
        a, b = starts[at], ends[at]
        order.append(at)
        busy = groups.busy_in(key, a, b)
        found = {
            "wall_s": (b - a) / 1e9,
            "busy_s": busy / 1e9,
            "idle_s": np.maximum(b - a - busy, 0) / 1e9,
            "duty": np.where(b > a, busy / np.maximum(b - a, 1), np.nan),
            **{f"{n}_s": v for n, v in timed.category_seconds(mine, a, b).items()},
        }
        for name, values in found.items():
            parts.setdefault(name, []).append(values)
    if not order:
        return pd.DataFrame(columns=STEP_COLUMNS)
    return joined(windows, order, parts, STEP_COLUMNS)


def joined(
    windows: pd.DataFrame, order: list[np.ndarray], parts: dict[str, list[Any]], columns: list[str]
) -> pd.DataFrame:
    """The rows of ``windows`` at ``order`` (each device's positions, in turn) with the
    columns ``parts`` (each device's block of values, in the same turn, joined), as the table
    of ``columns``: built once from its columns (the windows not taken where ``order`` keeps
    them as they are)."""
    import numpy as np
    import pandas as pd

    at = np.concatenate(order)
    if not np.array_equal(at, np.arange(len(windows))):
        windows = windows.take(at)
    data = {
        name: windows[name].array if name in windows.columns else _concatenated(parts[name])
        for name in columns
    }
    return pd.DataFrame(data, columns=columns, copy=False)


def _concatenated(blocks: list[Any]) -> Any:
    """Blocks of a column joined: arrays as one array, Series (each typed on its own) as
    ``pd.concat`` types them."""
    import numpy as np
    import pandas as pd

    if any(isinstance(block, pd.Series) for block in blocks):
        if len(blocks) == 1:
            return blocks[0].array
        return pd.concat(blocks, ignore_index=True).array
    return np.concatenate(blocks)


@dataclass
class DeviceGroups:
    """Each (session, host, device) of a device-events frame with its rows (positions,
    ascending), in ``groupby``'s order, and the events' times the per-device tables read
    (``timed``): found once, read by every per-device table."""

    groups: list[tuple[tuple[Any, Any, Any], np.ndarray]]
    by_text: dict[tuple[str, str, str], np.ndarray]
    timed: _Timed
    _busy: dict[tuple[str, str, str], Coverage] = field(default_factory=dict)
    _windows: tuple[pd.DataFrame, list[tuple[tuple[Any, ...], np.ndarray]]] | None = None
    _within: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray, np.ndarray]] = field(
        default_factory=dict
    )

    @classmethod
    def of(cls, frame: pd.DataFrame) -> DeviceGroups:
        groups = cols.groups_of(frame, ["session", "host", "device"])
        by_text = {(str(s), str(h), str(d)): rows for (s, h, d), rows in groups}
        return cls(groups, by_text, _Timed.of(frame))

    def rows(self, key: tuple[Any, ...]) -> np.ndarray:
        """The rows of (session, host, device) ``key``, compared as text (none: empty)."""
        import numpy as np

        found = self.by_text.get((str(key[0]), str(key[1]), str(key[2])))
        return np.zeros(0, np.int64) if found is None else found

    def compute(self, key: tuple[Any, ...]) -> np.ndarray:
        """The rows of ``key``'s compute (busy) events."""
        rows = self.rows(key)
        busy: np.ndarray = rows[self.timed.compute[rows]]
        return busy

    def windows(self, windows: pd.DataFrame) -> list[tuple[tuple[Any, ...], np.ndarray]]:
        """``windows``' (``step_windows``) devices, each with its rows (positions), in
        ``groupby(["session", "host", "device"], sort=True)``'s order: found once for the
        last table asked about, through its columns' codes."""
        if self._windows is None or self._windows[0] is not windows:
            self._windows = (windows, cols.groups_of(windows, ["session", "host", "device"]))
        return self._windows[1]

    def busy_in(self, key: tuple[Any, ...], a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``busy(key).within(a, b)``: the device's compute time in each window [a, b) (ns),
        kept for the last windows asked about (the steps table and the host-vs-device table
        ask about the same host steps)."""
        import numpy as np

        text = (str(key[0]), str(key[1]), str(key[2]))
        last = self._within.get(text)
        if last is not None and np.array_equal(last[0], a) and np.array_equal(last[1], b):
            return last[2]
        found = self.busy(key).within(a, b)
        self._within[text] = (a, b, found)
        return found

    def busy(self, key: tuple[Any, ...]) -> Coverage:
        """The union of ``key``'s compute events (found once per device)."""
        text = (str(key[0]), str(key[1]), str(key[2]))
        if text not in self._busy:
            rows = self.compute(key)
            self._busy[text] = Coverage.of(self.timed.starts[rows], self.timed.ends[rows])
        return self._busy[text]


@dataclass
class _Timed:
    """The device events' times as arrays, read once: starts, ends, which are busy
    (``compute``), self time on the trace's clock (``own``) and the index of each event's
    category in ``CATEGORIES`` (-1: none of them)."""

    starts: np.ndarray
    ends: np.ndarray
    compute: np.ndarray
    own: np.ndarray
    category: np.ndarray

    @classmethod
    def of(cls, frame: pd.DataFrame) -> _Timed:
        import numpy as np

        starts = frame["start_ns"].to_numpy()
        ends = frame["end_ns"].to_numpy()
        wall = (ends - starts).astype(np.float64)
        own = frame["self_ns"].to_numpy()
        times = frame["time_ns"].to_numpy()
        # Self time is measured on the device clock; steps are on the trace's (host) clock,
        # where a TPU op's converted duration differs by up to ~15%: scale self time to it.
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(times > 0, wall / times, 1.0)
        own = np.where(np.isnan(own), wall, own * scale)
        codes, names = cols.coded(frame["category"])
        index = np.array([*(_CATEGORY_INDEX.get(n, -1) for n in names), -1], dtype=np.int64)
        compute = frame["compute"].to_numpy(dtype=bool)
        return cls(starts, ends, compute, own, np.take(index, codes))

    def category_seconds(
        self, rows: np.ndarray, a: np.ndarray, b: np.ndarray
    ) -> dict[str, np.ndarray]:
        """Per category, the self time of the events at ``rows`` starting in each window
        [a, b): one ``bincount`` over (window, category), each sum over the same events in
        the same order as a ``bincount`` per category."""
        import numpy as np

        starts = self.starts[rows]
        order = np.argsort(a, kind="stable")
        index = np.searchsorted(a[order], starts, side="right") - 1
        valid = index >= 0
        window = np.where(valid, order[np.maximum(index, 0)], 0)
        valid &= starts < b[window]
        category = self.category[rows]
        valid &= category >= 0
        width = len(CATEGORIES)
        sums = np.bincount(
            window[valid] * width + category[valid],
            weights=self.own[rows][valid],
            minlength=len(a) * width,
        ).reshape(len(a), width)
        return {name: sums[:, i] / 1e9 for i, name in enumerate(CATEGORIES)}


_CATEGORY_INDEX = {name: i for i, name in enumerate(CATEGORIES)}


def event_coverage(frame: pd.DataFrame, rows: np.ndarray | None = None) -> Coverage:
    """The union of ``frame``'s events' intervals, of the ``rows`` (a mask) only where given:
    read from their start and end columns alone, so that a selection of a host's many events
    copies two arrays, not every column (a 1 GB host's analysis peaked at such a copy)."""
    start, end = frame["start_ns"].to_numpy(), frame["end_ns"].to_numpy()
    return Coverage.of(start, end) if rows is None else Coverage.of(start[rows], end[rows])


def with_session(events: pd.DataFrame) -> pd.DataFrame:
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
    groups: DeviceGroups | None = None,
) -> pd.DataFrame:
    """Per device over the whole capture: span, busy, idle (s), duty cycle, seconds per
    category, and how many steps were found and how (``step_source``); ``groups``: the
    frame's devices' rows, where the caller has them.

    The span runs from the device's first to its last event on its op and module lines (TPU)
    or on any non-derived line (GPU), as XProf's duty cycle does.
    """
    import numpy as np
    import pandas as pd

    frame = device_events(with_session(events)) if frame is None else frame
    if windows is None:
        windows = step_windows(events, frame, host_bounds)
    groups = DeviceGroups.of(frame) if groups is None else groups
    sources = {(str(s), str(h), str(d)): at for (s, h, d), at in groups.windows(windows)}
    numbered = windows["step"].notna().to_numpy()
    timed = groups.timed
    spans = frame["op_line"].to_numpy(dtype=bool) | cols.equals(frame["line"], MODULES_LINE)
    kinds = _kinds(frame)
    rows = []
    for (session, host, device), mine in groups.groups:
        spanning = mine[spans[mine]]
        if not len(spanning):
            continue
        start, end = int(timed.starts[spanning].min()), int(timed.ends[spanning].max())
        compute = mine[timed.compute[mine]]
        busy = groups.busy((session, host, device)).total
        steps = sources.get((str(session), str(host), str(device)))
        rows.append(
            {
                "session": session,
                "host": host,
                "device": device,
                "kind": str(kinds[mine[0]]),
                "span_s": (end - start) / 1e9,
                "busy_s": busy / 1e9,
                "idle_s": max(end - start - busy, 0) / 1e9,
                "duty": busy / (end - start) if end > start else None,
                "steps": 0 if steps is None else int(numbered[steps].sum()),
                "step_source": None
                if steps is None
                else str(windows["step_source"].iloc[int(steps[0])]),
                **{
                    f"{name}_s": float(seconds[0])
                    for name, seconds in timed.category_seconds(
                        compute, np.array([start]), np.array([end + 1])
                    ).items()
                },
            }
        )
    return pd.DataFrame(rows, columns=UTILIZATION_COLUMNS)
