"""``xspace_frame``: one ``.xplane.pb`` as the event frame (``xlaprof.parse.events``), in numpy.

``xspace_frame`` reads the small parts of a capture from upb's messages (planes, lines, event
and stat metadata: ``Layout``) and the events from their bytes (``xlaprof.parse.xplane.wire``);
this module joins the two into the frame ``xlaprof.parse.events.EventColumns`` makes for Chrome
traces from Python lists, with the same columns, values, order and quirks, but without a Python
step per event: names and stats are looked up by metadata id (``_Lookup``: a table indexed by id,
or ``searchsorted`` where ids are sparse), text columns are
categoricals made from codes (``pd.Categorical.from_codes``, not from a million strings),
columns are built in their final (sorted) order, and ``args`` builds no dict at all: it is an
``xlaprof.parse.xplane.args.ArgsArray`` over the decoded stats, which makes an event's dict when
its row is read.

At a million events memory is a good part of the time too (first touching fresh pages costs
system time): codes are as small as their categories allow, index temporaries are int32, the
decoded arrays are released once used, and the frame is put together from its columns without
copying them into blocks of one dtype.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xlaprof.errors import BadCapture
from xlaprof.parse.events import (
    INT64_MAX,
    NUMBER_STATS,
    TEXT_STATS,
    WHOLE_STATS,
    device_name,
    finite,
    plane_kind,
    step_number,
)
from xlaprof.parse.hlo_sources import embedded_hlo_protos
from xlaprof.parse.xplane.schema import (
    OP_LINES,
    canonical_event,
    epoch_offset_ns,
    hostname,
    message_class,
    parse_space,
    plane_info,
    profile_start_ns,
    read_capture,
    stat_value,
    undecodable,
)
from xlaprof.parse.xplane.wire import (
    REF,
    Events,
    Stats,
    StatValues,
    WireError,
    decode_events,
    native,
    split_space,
    take,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import pandas as pd

    from xlaprof.parse.xplane.args import EventStats

# What a load keeps of the stats by event number (``Layout._of_stats``): the promoted values
# and their strings, the framework ops (or None), the args' table with each event's row there
# (or None).
_OfStats = tuple[
    dict[str, tuple[np.ndarray, Any]],
    dict[str, "Strings"],
    tuple[list[tuple[np.ndarray, np.ndarray]], "Strings"] | None,
    tuple["EventStats", np.ndarray] | None,
]


def xspace_frame(
    path: Path,
    host: str | None = None,
    args: bool | frozenset[str] = True,
    framework_op: bool = False,
    limit: int | None = None,
    data: bytes | None = None,
    read_only: bool = False,
) -> pd.DataFrame:
    """All timed events of one ``.xplane.pb`` as a DataFrame (see module docstring).

    ``frame.attrs`` holds ``profile_start_ns`` (when profiling began, None if not recorded),
    ``devices`` (one ``plane_info`` dict per device plane that has events), ``hlo_protos``
    (the programs the capture embeds, ``hlo_sources.embedded_hlo_protos``: read here, so that
    finding their source lines does not parse the file again) and ``dropped_events``.
    ``args`` is decoded on demand (``xlaprof.parse.xplane.args``). With ``args=False`` it is
    None on every row and the stats are not kept (for callers that keep
    every column but ``args``, like the pod cache): what the analysis reads from ``args`` on an
    XSpace (``group_id``) is a column. With ``args`` a set of stat names, ``args`` holds those
    stats alone (an event with none of them: None), and reading another by name is an error:
    the analysis reads four (``tables.device.events.STATS_READ``) of a capture's tens, and a
    1 GB host's frame held ~13 bytes a stat for the rest.
    ``framework_op=True`` adds the one more thing it reads there as a column of its own,
    ``framework_op``: the event's own ``name`` stat (JAX's name stack), else its ``tf_op``,
    where that is text and not XLA's placeholder (``XlaModule:``); as
    ``tables.device.events`` reads it from ``args``. ``data``: the file's bytes, where the
    caller has read them (``read_capture``: a pod worker fingerprints what it decodes).
    ``read_only``: for a caller that writes into none of the frame's columns (the analysis's
    own load): a float stat missing on every event (a CPU host's four device stats) is then
    one read-only NaN that every row views, not an array of NaN: 8 bytes an event, 350 MB of a
    1 GB host's frame (``Constants``).
    """
    path = Path(path)
    # limit: --max-size (None: protobuf's own cap). A large file decoded by the compiled core
    # is read into a map of its own, which the core gives back to the kernel as it passes it
    # (``RELEASE_FROM``).
    releasing = data is None and native() is not None and _size(path) >= RELEASE_FROM
    raw = read_capture(path, limit, mapped=releasing) if data is None else data
    releasing = releasing and not isinstance(raw, bytes)
    space_class = message_class("XSpace", events_as_bytes=True)
    skeleton = _skeleton(raw, space_class)
    if skeleton is None and releasing:  # upb and the numpy decoder read bytes: read anew
        raw = None  # (the map let go first: not a second copy of a large file beside it)
        raw, releasing = read_capture(path, limit), False
    space = parse_space(path, raw, space_class) if skeleton is None else skeleton[0]
    if not space.planes:
        size = path.stat().st_size
        what = "empty file" if size == 0 else f"{size} bytes with no profiler planes"
        raise BadCapture(f"{path}: {what}, not an xplane capture")
    if skeleton is None:
        counts = [[len(line.events) for line in plane.lines] for plane in space.planes]
    else:
        counts = skeleton[3]
    with_events = [index for index, lines in enumerate(counts) if any(lines)]
    planes = [space.planes[index] for index in with_events]
    layout = Layout(planes, [counts[index] for index in with_events])
    devices = [plane_info(plane) for plane in planes if plane_kind(plane.name) == "device"]
    start_ns = profile_start_ns(space)
    epoch_ns = epoch_offset_ns(space)
    host = host or hostname(space, path)
    hlo_protos = embedded_hlo_protos(space)
    if skeleton is None:
        data, starts, ends = split_space(space, raw)  # may empty the space: read by now
    else:
        data, (_, starts, ends, _) = raw, skeleton
    del space, planes
    try:
        events = decode_events(data, starts, ends, canonical_event, releasing)
    except WireError:
        raise undecodable(path, raw) from None
    if events is None:  # an event for upb to re-encode, its bytes given back: read them anew
        del data, starts, ends, raw, skeleton
        return xspace_frame(
            path, host, args, framework_op, limit, read_capture(path, limit), read_only
        )
    # The file's bytes are not read again: on a 1 GB capture they were a good part of the
    # peak while the frame is made.
    del data, starts, ends, raw, skeleton
    frame = layout.frame(events, host, args, framework_op, read_only)
    frame.attrs["profile_start_ns"] = start_ns
    if epoch_ns is not None:
        frame.attrs["epoch_offset_ns"] = epoch_ns
    frame.attrs["devices"] = devices
    frame.attrs["hlo_protos"] = hlo_protos
    return frame


# The file size from which a capture's bytes are given back to the kernel as the compiled core
# decodes them (``xspace_frame``). A 1 GB host's decode held all of them beside the decoded
# arrays (its analysis' peak: 3.05 GB -> 2.87 GB with them given back). Below, the freed bytes
# are worth more kept: the commands reuse freed memory for inputs up to 512 MB
# (``cli.process_memory``), and giving back an 80 MB host's cost 56k more page faults (+0.3 s)
# for 26 MB less peak, a 250 MB host's raised its peak (909 -> 996 MB).
RELEASE_FROM = 512 * 1024 * 1024


def _size(path: Path) -> int:
    """The file's size (0 where it cannot be looked at: reading it says why)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _skeleton(raw: bytes, space_class: Any) -> tuple[Any, Any, Any, list[list[int]]] | None:
    """The capture parsed by upb without its events (the compiled core's ``skeleton``: the
    file with every ``XLine.events`` field taken out), where each event lies in ``raw``, and
    the events of each line, per plane; None where the core is not built, its walk of the file
    does not hold, or upb refuses what is left (then upb parses the whole file, and names what
    is wrong with it)."""
    from google.protobuf.message import DecodeError

    core = native()
    found = None if core is None else core.skeleton(raw)
    if found is None:
        return None
    bones, starts, ends, line_events = found
    space = space_class()
    try:
        space.ParseFromString(bones)
    except DecodeError:
        return None
    counts, first = [], 0
    for plane in space.planes:
        counts.append(line_events[first : first + len(plane.lines)])
        first += len(plane.lines)
    if first != len(line_events):
        return None
    return space, starts, ends, counts


class Strings:
    """Distinct strings, each with a code (the order they came in)."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.items: list[str] = []

    def code(self, text: str | None) -> int:
        """The code of ``text`` (added if new); -1 for None."""
        if text is None:
            return -1
        code = self.codes.get(text)
        if code is None:
            code = self.codes[text] = len(self.items)
            self.items.append(text)
        return code

    def text_code(self, value: object) -> int:
        """The code of a promoted text stat's value, as the column holds it (added if new)."""
        return self.code(_text(value))

    def categorical(
        self,
        codes: np.ndarray,
        index: np.ndarray | None = None,
        rows: np.ndarray | None = None,
        constants: Constants | None = None,
    ) -> pd.Categorical[str]:
        """``codes`` (-1: missing) as the categorical ``pd.Categorical`` makes of the strings
        themselves: categories the strings used, sorted; codes as small as they allow.

        With ``index``, ``codes`` is a small table and the column is ``codes[index]``: which
        codes are used is then read off the table (``rows``: the entries ``index`` points to,
        None for all of them) rather than off a million rows, and the column is one gather;
        where every entry used is one code, the column is ``constants``' (no gather at all).
        """
        import pandas as pd

        used_codes = codes if index is None or rows is None else codes[rows]
        seen = np.zeros(len(self.items) + 1, bool)  # the last slot: -1
        seen[used_codes] = True  # (several times faster than np.bincount where codes repeat)
        used = np.flatnonzero(seen[:-1])
        ordered = sorted(used.tolist(), key=self.items.__getitem__)
        small = _code_type(len(ordered))
        recode = np.full(len(self.items) + 1, -1, small)  # the last slot recodes -1
        recode[ordered] = np.arange(len(ordered))
        categories = [self.items[code] for code in ordered]
        dtype: pd.CategoricalDtype[str] = pd.CategoricalDtype(categories)
        if index is None:
            column = take(recode, codes)
        elif constants is not None and len(used_codes) and seen.sum() == 1:
            column = constants.codes(small, int(recode[used_codes[0]]))  # one code in every row
        else:
            column = take(take(recode, codes), index)
        # The codes are in range by construction: pandas' check is two passes over them.
        return pd.Categorical.from_codes(column, dtype=dtype, validate=False)


class Constants:
    """Columns of one value throughout (the frame's missing stats, a capture's one host), made
    without a row-long pass each: an 80 MB host's frame has four float columns of NaN and
    several of one code, each ~4-30 MB of pages first touched.

    ``codes`` makes a column's codes (zeros from calloc: pages untouched until read); ``shared``
    and ``missing_integers`` give a column that shares one array with the frame's other
    columns of that value, as pandas Series: pandas then knows they share it, and copies a
    column where a caller sets a value in it (copy-on-write), so the others stay as they are.
    With ``read_only``, ``shared`` gives one read-only value that every row views (a stride of
    0 bytes): no memory a row. pandas copies such a column where a value is set in it while
    another column shares it, but raises where none does: only for frames no one writes into.
    """

    def __init__(self, rows: int, read_only: bool = False) -> None:
        self.rows = rows
        self.read_only = read_only
        self.made: dict[tuple[str, str], pd.Series[Any]] = {}

    def codes(self, dtype: Any, value: int) -> np.ndarray:
        """``rows`` of ``value`` as ``dtype``, an array of its own."""
        if value == 0:
            return np.zeros(self.rows, dtype)
        return np.full(self.rows, value, dtype)

    def shared(self, dtype: Any, value: float) -> pd.Series[Any]:
        """A column of ``rows`` of ``value``, sharing its array with the others of it (with
        ``read_only``: one value viewed by every row)."""

        def make() -> np.ndarray:
            if self.read_only:
                return np.broadcast_to(np.array(value, dtype), (self.rows,))
            return np.full(self.rows, value, dtype)

        return self._base((np.dtype(dtype).str, repr(value)), make)

    def missing_integers(self) -> pd.Series[Any]:
        """A whole-number column (``Int64``) missing throughout, sharing its arrays."""
        import pandas as pd

        def make() -> Any:
            return pd.arrays.IntegerArray(np.zeros(self.rows, np.int64), np.ones(self.rows, bool))

        return self._base(("Int64", "missing"), make)

    def _base(self, key: tuple[str, str], make: Callable[[], Any]) -> pd.Series[Any]:
        import pandas as pd

        base = self.made.get(key)
        if base is None:
            base = self.made[key] = pd.Series(make(), copy=False)
        return base.copy(deep=False)


def _code_type(count: int) -> Any:
    """The codes' dtype pandas gives ``count`` categories."""
    for dtype in (np.int8, np.int16, np.int32):
        if count < np.iinfo(dtype).max:
            return dtype
    return np.int64


class Layout:
    """What the frame needs of an XSpace besides its events' bytes (read before
    ``wire.split_space`` empties it): per plane with events, its metadata tables; per
    line with events, its name, time base and event count.

    Event metadata is decoded once per entry, as the frame holds it: its name and
    promoted stats (``meta_rows``; a second row per entry carries the display name as
    ``hlo_op``, for events on op lines).
    """

    def __init__(self, planes: list[Any], counts: list[list[int]]) -> None:
        self.strings = Strings()  # line and event names
        self.stat_names = Strings()
        self.meta_rows: list[dict[str, Any]] = [{}]
        self.events: list[np.ndarray] = []  # per plane: key, name, meta row, op-line meta row
        self.stats: list[np.ndarray] = []  # per plane: key, stat name
        self.planes: list[str] = []
        self.lines: list[tuple[int, int, int, int, bool]] = []  # name, plane, stamp, count, op
        for plane, line_counts in zip(planes, counts, strict=True):
            self._add_tables(plane)
            for line, count in zip(plane.lines, line_counts, strict=True):
                if count:
                    name = line.display_name or line.name
                    code = self.strings.code(name)
                    self.lines.append(
                        (code, len(self.planes), line.timestamp_ns, count, name in OP_LINES)
                    )
            self.planes.append(plane.name)

    def _add_tables(self, plane: Any) -> None:
        stat_names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        entries = []
        for key, meta in plane.event_metadata.items():
            stats = {
                stat_names.get(s.metadata_id, "?"): stat_value(s, stat_names) for s in meta.stats
            }
            promoted = {k: stats[k] for k in (*TEXT_STATS, *NUMBER_STATS) if k in stats}
            row = op_row = 0
            if promoted:
                row = op_row = len(self.meta_rows)
                self.meta_rows.append(promoted)
            if meta.display_name and "hlo_op" not in promoted:
                op_row = len(self.meta_rows)
                self.meta_rows.append({**promoted, "hlo_op": meta.display_name})
            entries.append((key, self.strings.code(meta.name), row, op_row))
        self.events.append(np.array(sorted(entries), np.int64).reshape(-1, 4))
        named = sorted((key, self.stat_names.code(name)) for key, name in stat_names.items())
        self.stats.append(np.array(named, np.int64).reshape(-1, 2))

    def frame(
        self,
        events: Events,
        host: str,
        args: bool | frozenset[str],
        framework_op: bool = False,
        read_only: bool = False,
    ) -> pd.DataFrame:
        """The event frame (see the module docstring) of ``events``, in this layout's order.

        ``events`` is emptied: each array is dropped once used, and what comes of the stats
        (the promoted values, the args' table) is made first, by event number, and placed in
        frame order once the times are made, so that the decoded stats, the times and the
        frame are not all in memory at once; ``args`` keeps the stats' values, names and
        bounds (not their events' ids), to decode on demand. ``read_only``: see
        ``xspace_frame``.
        """
        import pandas as pd

        metadata_id, offset_ps, duration_ps, first_stat, stats = events.take()
        count = len(metadata_id)
        line_name, line_plane, stamps, counts = (
            np.array([line[field] for line in self.lines], dtype)
            for field, dtype in enumerate((np.int32, np.int32, np.int64, np.int64))
        )
        # The stats first, by event number, while the times are not made yet: what the frame
        # keeps of them (the promoted values, the args) is small next to the decoded stats,
        # which a 1 GB host's load peaked holding beside the times.
        promoted, texts, framework_ops, args_table = self._of_stats(
            first_stat, stats, args, framework_op
        )
        del first_stat, stats

        times, order = event_times(offset_ps, duration_ps, stamps, counts)
        del offset_ps, duration_ps
        rows = len(order)
        names, meta = self._event_lookups(metadata_id)
        del metadata_id
        # Where each event lands (-1: dropped): what was found by event number, placed.
        rank = np.full(count, -1, np.int32)
        rank[order] = np.arange(rows, dtype=np.int32)
        promoted = {key: _placed(rank, *found) for key, found in promoted.items()}
        framework_column = None
        if framework_ops is not None:
            framework_column = _framework_column(rank, rows, *framework_ops)
        del rank, framework_ops
        if not rows:  # as the Chrome reader's did: pandas makes an empty list float64
            args_column: Any = []
        elif args_table is not None:
            from xlaprof.parse.xplane.args import ArgsArray

            table, place = args_table
            args_column = ArgsArray(table, take(place, order))
            del table, place
        else:
            args_column = np.full(rows, None, object)
        del args_table

        line_of = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
        lines = take(line_of, order)
        del line_of
        constants = Constants(rows, read_only)
        columns = self._line_columns(lines, line_name, line_plane, host, rows < count, constants)
        # Every event kept: the names are recoded in event order (a small table's gather) and
        # then put in frame order.
        every = rows == count
        columns["name"] = self.strings.categorical(
            *((names, order) if every else (take(names, order),))
        )
        columns.update(times)
        del lines, names, times
        columns.update(self._stat_columns(meta, order, promoted, texts, constants))
        columns["args"] = args_column
        if framework_column is not None:
            columns["framework_op"] = framework_column
        del meta, promoted, args_column, framework_column, order  # (order: 8 bytes an event)
        if rows:
            # The columns as they are: DataFrame() would copy each into a block of its dtype.
            # ``args`` without stats read (args=False) is an object array of None.
            series = [
                pd.Series(value, name=key, copy=False, dtype=_object_if_array(key, value))
                for key, value in columns.items()
            ]
            frame = pd.concat(series, axis=1)
        else:
            frame = pd.DataFrame(columns)
        frame.attrs["dropped_events"] = count - rows
        return frame

    def _kept_stats(
        self,
        kept: frozenset[str],
        first_stat: np.ndarray,
        stat_name: np.ndarray,
        values: StatValues,
    ) -> tuple[np.ndarray, np.ndarray, StatValues]:
        """The stats named in ``kept`` alone: each event's bounds among them (``first_stat``'s
        type), their names' codes and their values."""
        wanted = np.zeros(len(self.stat_names.items) + 1, bool)
        for name in kept:
            code = self.stat_names.codes.get(name)
            if code is not None:
                wanted[code] = True
        chosen = take(wanted, stat_name)
        # Before each stat, how many chosen stats precede it (and after the last, all).
        before = np.zeros(len(chosen) + 1, first_stat.dtype)
        np.cumsum(chosen, dtype=before.dtype, out=before[1:])
        return take(before, first_stat), stat_name[chosen], values.subset(chosen)

    def _line_columns(
        self,
        lines: np.ndarray,
        line_name: np.ndarray,
        line_plane: np.ndarray,
        host: str,
        dropped: bool,
        constants: Constants,
    ) -> dict[str, Any]:
        """The columns that follow from each row's line (``lines``: its index in ``self.lines``),
        each a table of one code per line gathered once. ``dropped``: whether events were
        dropped (then a line may have no rows, and its strings are not categories)."""
        kept_lines = None
        if dropped:
            seen = np.zeros(len(line_name), bool)
            seen[lines] = True
            kept_lines = np.flatnonzero(seen)
        planes = [self.planes[plane] for plane in line_plane.tolist()]  # per line
        kinds, devices, plane_names, hosts = Strings(), Strings(), Strings(), Strings()
        per_line = {
            "host": (hosts, _codes(hosts, [host] * len(planes))),
            "plane": (plane_names, _codes(plane_names, planes)),
            "plane_kind": (kinds, _codes(kinds, [plane_kind(plane) for plane in planes])),
            "device": (devices, _codes(devices, [device_name(plane) for plane in planes])),
            "line": (self.strings, line_name),
        }
        return {
            key: strings.categorical(table, lines, kept_lines, constants)
            for key, (strings, table) in per_line.items()
        }

    def _of_stats(
        self, first_stat: np.ndarray, stats: Stats, args: bool | frozenset[str], framework: bool
    ) -> _OfStats:
        """What the frame keeps of the events' stats, by event number (``_OfStats``): the
        promoted values (``_promoted``), the framework ops where ``framework`` is asked for
        (``_framework_ops``), and where ``args`` keeps any stats their table with each event's
        row there (``EventStats.of_events``)."""
        stat_name, ref_name = self._stat_lookups(first_stat, stats)
        owners = stats.event
        values = StatValues(stats, self.stat_names.items, ref_name).slim()
        del stats, ref_name
        promoted, texts = self._promoted(owners, values, stat_name)
        framework_ops = self._framework_ops(owners, values, stat_name) if framework else None
        del owners
        if len(first_stat) == 1 or args is False:
            return promoted, texts, framework_ops, None
        from xlaprof.parse.xplane.args import EventStats

        kept = args if isinstance(args, frozenset) else None
        if kept is not None:
            first_stat, stat_name, values = self._kept_stats(kept, first_stat, stat_name, values)
        return (
            promoted,
            texts,
            framework_ops,
            EventStats.of_events(first_stat, stat_name, values, kept),
        )

    def _planes(self) -> list[tuple[int, int, list[tuple[Any, ...]]]]:
        """Per plane, its first and last event (a run of the events) and its lines."""
        found, first = [], 0
        for plane in range(len(self.events)):
            lines = [line for line in self.lines if line[1] == plane]
            last = first + sum(line[3] for line in lines)
            found.append((first, last, lines))
            first = last
        return found

    def _stat_lookups(self, first_stat: np.ndarray, stats: Stats) -> tuple[np.ndarray, ...]:
        """Per stat, its name's code and the code of the stat a ``ref_value`` names (-1:
        none). Metadata ids are looked up per plane: each plane's stats are one run of them."""
        unknown = self.stat_names.code("?")
        # A stat's name codes as int16 where every name's fits (a capture has tens of stat
        # names): 4 bytes a stat less in the frame's args, 145 MB of a 1 GB host's.
        width = np.int16 if len(self.stat_names.items) <= np.iinfo(np.int16).max else np.int32
        stat_name = np.empty(len(stats.event), width)
        ref_name = np.full(len(stats.event), -1, width)
        for named, (first, last, _) in zip(self.stats, self._planes(), strict=True):
            low, high = int(first_stat[first]), int(first_stat[last])
            named_stats = _Lookup(named[:, 0], named[:, 1], high - low, unknown, width)
            stat_name[low:high] = named_stats(stats.metadata_id[low:high])
            refs = low + np.flatnonzero(stats.kind[low:high] == REF)
            raw = stats.raw[refs]
            inside = raw <= INT64_MAX  # keys are int64: a larger ref_value names no stat
            found = _lookup(named[:, 0], named[:, 1], np.where(inside, raw, 0).view(np.int64), -1)
            ref_name[refs] = np.where(inside, found, -1)
        return stat_name, ref_name

    def _event_lookups(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per event (``ids``: its metadata id), its name's code and its metadata row, looked
        up per plane: each plane's events are one run of them."""
        names = np.empty(len(ids), np.int32)
        meta = np.empty(len(ids), np.int32)
        empty = self.strings.code("")
        for table, (first, last, lines) in zip(self.events, self._planes(), strict=True):
            mine = ids[first:last]
            names[first:last] = _lookup(table[:, 0], table[:, 1], mine, empty)
            # An event's metadata row: on op lines the one that carries its display name.
            rows = {
                op: _Lookup(table[:, 0], table[:, 3 if op else 2], len(mine), 0)
                for op in (False, True)
            }
            at = first
            for line in lines:  # each line's events are one run of the plane's
                meta[at : at + line[3]] = rows[line[4]](ids[at : at + line[3]])
                at += line[3]
        return names, meta

    def _promoted(
        self, owners: np.ndarray, values: StatValues, stat_name: np.ndarray
    ) -> tuple[dict[str, tuple[np.ndarray, Any]], dict[str, Strings]]:
        """Per promoted stat, the events' own values: their events' numbers (``owners``: each
        stat's; ``_placed`` finds their rows) and the values as the column holds them (text:
        codes in ``texts[key]``; whole numbers: values and a missing mask; floats). Of two
        stats of one name on an event, its last (as in its ``args``); an event's stat wins
        over its metadata's (as in XProf)."""
        found: dict[str, tuple[np.ndarray, Any]] = {}
        texts = {key: Strings() for key in TEXT_STATS}
        keys = [
            (key, self.stat_names.codes[key])
            for key in (*TEXT_STATS, *WHOLE_STATS, *NUMBER_STATS)
            if key in self.stat_names.codes
        ]
        # Which promoted stat each stat row is (-1: none), in one pass over the stats; then the
        # rows of each, in stat order (a stable sort of the few rows that are promoted at all).
        which = np.full(len(self.stat_names.items) + 1, -1, np.int8)
        for number, (_, code) in enumerate(keys):
            which[code] = number
        promoted_rows = np.flatnonzero(take(which, stat_name) >= 0)
        kinds = take(which, stat_name[promoted_rows])
        by_kind = np.argsort(kinds, kind="stable")
        bounds = np.searchsorted(kinds[by_kind], np.arange(len(keys) + 1))
        for number, (key, _) in enumerate(keys):
            rows = promoted_rows[by_kind[bounds[number] : bounds[number + 1]]]
            if not len(rows):
                continue
            owner = owners[rows]
            last = np.append(owner[1:] != owner[:-1], True)
            rows, where = rows[last], owner[last]
            if key in texts:
                found[key] = (where, values.codes(rows, texts[key].text_code))
            elif key in WHOLE_STATS:
                found[key] = (where, values.integers(rows, step_number))
            else:
                found[key] = (where, values.floats(rows, finite))
        return found, texts

    def _framework_ops(
        self, owners: np.ndarray, values: StatValues, stat_name: np.ndarray
    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], Strings]:
        """Per event, its own ``name`` stat, else its ``tf_op`` (of two stats of one name, the
        last, as in ``args``), where that is text and not ``XlaModule:``-like: the framework op
        ``tables.device.events`` reads from ``args``. As (events, codes in the strings) per
        stat, ``tf_op``'s first, for ``_framework_column`` to place (the last placed wins)."""
        strings = Strings()

        def code(value: object) -> int:
            if isinstance(value, str) and value and not value.endswith(":"):
                return strings.code(value)
            return -1

        found_ops = []
        for key in ("tf_op", "name"):  # the name stack, where there is one, wins
            stat = self.stat_names.codes.get(key)
            if stat is None:
                continue
            found = np.flatnonzero(stat_name == stat)
            if not len(found):
                continue
            owner = owners[found]
            last = np.append(owner[1:] != owner[:-1], True)
            value = values.codes(found[last], code)
            usable = value >= 0
            found_ops.append((owner[last][usable], value[usable]))
        return found_ops, strings

    def _stat_columns(
        self,
        meta: np.ndarray,
        order: np.ndarray,
        promoted: dict[str, tuple[np.ndarray, Any]],
        texts: dict[str, Strings],
        constants: Constants,
    ) -> dict[str, Any]:
        """The promoted stat columns, in frame order: each row's metadata values (``meta[order]``:
        its row of ``meta_rows``), then the event's own stats over them (``promoted``).

        A stat no metadata entry carries (the common case) is a column of missing values with
        the events' own scattered in, made without reading ``meta`` at all; one that no event
        carries either is ``constants``' column of missing values."""

        rows = len(order)
        ordered: list[np.ndarray] = []  # meta[order], made once if a column needs it
        used: list[np.ndarray] = []  # the entries of meta_rows it holds, found once

        def meta_rows() -> np.ndarray:
            if not ordered:
                ordered.append(take(meta, order))
            return ordered[0]

        def used_rows() -> np.ndarray:
            if not used:
                seen = np.zeros(len(self.meta_rows), bool)
                seen[meta_rows()] = True
                used.append(np.flatnonzero(seen))
            return used[0]

        columns: dict[str, Any] = {
            key: self._text_column(
                key, texts[key], rows, (meta_rows, used_rows), promoted, constants
            )
            for key in TEXT_STATS
        }
        for key in ("step_num", *NUMBER_STATS, "group_id"):
            columns[key] = self._number_column(key, rows, meta_rows, promoted, constants)
        return columns

    def _number_column(
        self,
        key: str,
        rows: int,
        meta_rows: Callable[[], np.ndarray],
        promoted: dict[str, tuple[np.ndarray, Any]],
        constants: Constants,
    ) -> Any:
        """One promoted numeric stat's column (see ``_stat_columns``): whole numbers as an
        ``IntegerArray``, the rest as float64."""
        import pandas as pd

        if key in WHOLE_STATS:
            if key not in promoted:
                return constants.missing_integers()
            number, missing = np.zeros(rows, np.int64), np.ones(rows, bool)
            where, (found_number, found_missing) = promoted[key]
            number[where], missing[where] = found_number, found_missing
            return pd.arrays.IntegerArray(number, missing)
        table = np.array([finite(row.get(key)) for row in self.meta_rows], np.float64)
        if np.isnan(table).all() and key not in promoted:
            return constants.shared(np.float64, np.nan)
        column = np.full(rows, np.nan) if np.isnan(table).all() else take(table, meta_rows())
        if key in promoted:
            where, found = promoted[key]
            column[where] = found
        return column

    def _text_column(
        self,
        key: str,
        strings: Strings,
        rows: int,
        meta: tuple[Callable[[], np.ndarray], Callable[[], np.ndarray]],
        promoted: dict[str, tuple[np.ndarray, Any]],
        constants: Constants,
    ) -> pd.Categorical[str]:
        """One promoted text stat's column (see ``_stat_columns``; ``meta``: each row's entry of
        ``meta_rows``, and the entries rows hold). Where no event has its own value, the column
        is the metadata's table gathered once by each row's entry."""
        meta_rows, used_rows = meta
        table = _codes(strings, [_text(row.get(key)) for row in self.meta_rows])
        own = promoted.get(key)
        if (table < 0).all() and own is None:  # missing throughout: no categories
            return strings.categorical(
                np.full(1, -1, np.int32), constants.codes(np.int32, 0), None, constants
            )
        if (table < 0).all() and own is not None:
            where, found = own
            table = np.append(found, -1)  # the events' own codes, then a missing one
            index = np.full(rows, len(found), np.int32)
            index[where] = np.arange(len(found), dtype=np.int32)
            return strings.categorical(table, index)
        if own is None:
            return strings.categorical(table, meta_rows(), used_rows(), constants)
        codes = np.full(rows, -1, np.int32) if (table < 0).all() else take(table, meta_rows())
        if own is not None:
            where, found = own
            codes[where] = found
        return strings.categorical(codes)


def _placed(rank: np.ndarray, owner: np.ndarray, value: Any) -> tuple[np.ndarray, Any]:
    """Values found by event number (``owner``: a promoted stat's or a framework op's) as the
    rows where they land (``rank``: each event's row, -1 where dropped) and their values there
    (whole numbers: a tuple of the values and their missing mask)."""
    where = take(rank, owner)
    kept = where >= 0
    if kept.all():
        return where, value
    if isinstance(value, tuple):  # whole numbers: the values and their missing mask
        return where[kept], tuple(part[kept] for part in value)
    return where[kept], value[kept]


def _framework_column(
    rank: np.ndarray, rows: int, found: list[tuple[np.ndarray, np.ndarray]], strings: Strings
) -> pd.Categorical[str]:
    """The ``framework_op`` column of ``rows`` rows from ``Layout._framework_ops``' events
    and codes, each placed at its event's row (``rank``; -1: dropped), the later winning."""
    codes = np.full(rows, -1, np.int64)
    for owner, value in found:
        where, placed = _placed(rank, owner, value)
        codes[where] = placed
    return strings.categorical(codes)


def _object_if_array(key: str, value: object) -> type[object] | None:
    return object if key == "args" and isinstance(value, np.ndarray) else None


def event_times(
    offset_ps: np.ndarray,
    duration_ps: np.ndarray,
    stamps: np.ndarray,
    counts: np.ndarray,
    pure: bool = False,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``start_ns``, ``end_ns`` and ``duration_ns`` in frame order, and the order: the events
    kept (see ``_place``), by start, stably (as ``sort_values(kind="stable")``). The events are
    in line order (``counts`` a line, whose time base is ``stamps``, in ns). By the compiled
    core where every event is kept and each line is in time order, else (or ``pure``) numpy."""
    base_ns = int(stamps.min()) if len(stamps) else 0
    bases = [(int(stamp) - base_ns) * 1000 for stamp in stamps]
    core = native(pure)
    if core is not None and all(-(2**62) <= base <= 2**62 for base in bases):
        # Every event kept and each line in time order (the common case): a merge in C.
        found = core.times(offset_ps, duration_ps, np.array(bases, np.int64), counts)
        if found is not None:
            start_ns, end_ns, duration_ns, order = found
            start_ns += base_ns
            end_ns += base_ns
            return {"start_ns": start_ns, "end_ns": end_ns, "duration_ns": duration_ns}, order
    start_ps, keep = _place(bases, counts, offset_ps, duration_ps)
    kept = None if keep.all() else np.flatnonzero(keep)
    start_ns = base_ns + (start_ps if kept is None else start_ps[kept]) // 1000
    sorter = np.argsort(start_ns, kind="stable")
    order = sorter if kept is None else kept[sorter]
    start_ps = start_ps[order]
    duration_ps = duration_ps[order]
    start_ps += duration_ps  # the ends
    columns = {
        "start_ns": start_ns[sorter],
        "end_ns": base_ns + start_ps // 1000,
        "duration_ns": duration_ps / 1000.0,
    }
    return columns, order


def _text(value: object) -> str | None:
    """A promoted text stat's value as the column holds it."""
    return None if value is None else str(value)


def _codes(strings: Strings, texts: Sequence[str | None]) -> np.ndarray:
    return np.array([strings.code(text) for text in texts], np.int32).reshape(-1)


class _Lookup:
    """The values of a table keyed by sorted int64 ids (metadata ids), looked up for many
    queries at once; ``default`` where a query has no key.

    Metadata ids are mostly small and dense (1, 2, 3, ...): then a table indexed by id answers
    with one gather, many times faster than a binary search per query. Ids that are negative or
    spread far apart (a table would be large next to the queries) are searched for."""

    def __init__(
        self, keys: np.ndarray, values: np.ndarray, queries: int, default: int, dtype: Any = None
    ) -> None:
        """``dtype``: the answers' (int32 unless given; every value and the default fit it)."""
        self.keys, self.values, self.default = keys, values, default
        self.dtype = np.dtype(np.int32 if dtype is None else dtype)
        self.by_id: np.ndarray | None = None
        if len(keys) and keys[0] > 0 and keys[-1] < _DENSE_IDS + 4 * queries:
            # The first slot (id 0, no key) and the last answer every id out of range.
            self.by_id = np.full(int(keys[-1]) + 2, default, self.dtype)
            self.by_id[keys] = values

    def __call__(self, query: np.ndarray) -> np.ndarray:
        if self.by_id is not None:
            # Ids past the table clip to its last slot, negative ones to its first: both hold
            # the default (a table is made only where no key is 0).
            found: np.ndarray = take(self.by_id, query, clip=True)
            return found
        if not len(self.keys):
            return np.full(len(query), self.default, self.dtype)
        at = np.searchsorted(self.keys, query)
        np.minimum(at, len(self.keys) - 1, out=at)
        found = np.where(self.keys[at] == query, self.values[at], self.default)
        return found.astype(self.dtype)


def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray, default: int) -> np.ndarray:
    """``_Lookup`` of one set of queries."""
    return _Lookup(keys, values, len(query), default)(query)


# Ids up to this (plus a few per query) are looked up in a table indexed by id.
_DENSE_IDS = 1 << 16


def _place(
    bases: list[int], counts: np.ndarray, offset_ps: np.ndarray, duration_ps: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each event's start (picoseconds after the capture's base: its line's base plus its
    offset) and whether it is kept: as ``EventColumns``, start and end must fit
    int64 picoseconds and the duration must not be negative. Exact: in int64 where the sums
    cannot overflow, else (a damaged capture) in Python integers."""
    limit = 2**62
    small = all(-limit <= base <= limit for base in bases)
    if small and (not len(offset_ps) or (-limit <= offset_ps.min() and offset_ps.max() <= limit)):
        start = np.repeat(np.array(bases, np.int64), counts)
        start += offset_ps
        if not len(start) or (
            duration_ps.min() >= 0
            and start.min() >= -INT64_MAX
            and int(start.max()) + int(duration_ps.max()) <= INT64_MAX
        ):  # every event kept (the common case): four passes, not an array of each test
            return start, np.ones(len(start), bool)
        room = np.maximum(start, 0)
        np.subtract(INT64_MAX, room, out=room)  # start + duration <= max, without overflow
        keep = duration_ps <= room
        keep &= duration_ps >= 0
        keep &= start >= -INT64_MAX
        return start, keep
    start = np.repeat(np.array(bases, object), counts) + offset_ps.astype(object)
    end = start + duration_ps.astype(object)
    keep = (start >= -INT64_MAX) & (start <= INT64_MAX) & (duration_ps >= 0)
    keep = (keep & (end <= INT64_MAX)).astype(bool)
    return np.where(keep, start, 0).astype(np.int64), keep
