"""XEvents decoded from their wire bytes with numpy, every event of a capture at once.

Why a module of its own: upb parses an XSpace in C, but reading a million ``XEvent`` messages
back through Python attribute access costs a few microseconds an event (seconds a capture).
So ``xspace_frame`` parses with a *shadow* schema in which ``XLine.events`` is
``repeated bytes`` (the same wire format): upb still walks the file in C and checks everything
above the events, and this module decodes the events' own bytes, all of them at once:
``split_space`` finds where every event lies in the file's own bytes (or has upb lay them out),
``decode_events`` reads their fields and stats into arrays, and ``StatValues`` turns stat
values into the Python values upb's messages give, once per distinct value.

Protobuf wire format, as used here: a message is a sequence of fields, each a tag varint
(``field_number << 3 | wire_type``) followed by a varint (wire type 0), 8 bytes (1), a length
varint and that many bytes (2) or 4 bytes (5). ``XEvent``: metadata_id=1, offset_ps=2,
duration_ps=3 (varints), stats=4 (``XStat`` messages), num_occurrences=5 (varint, in a oneof
with offset_ps). ``XStat``: metadata_id=1, then a oneof of double_value=2 (fixed64),
uint64_value=3, int64_value=4 (varints; a negative int64 is 10 bytes of two's complement),
str_value=5, bytes_value=6 (length-delimited), ref_value=7 (varint).

Decoding goes in rounds: each round reads the next field of every event not yet finished
(one tag, one varint per event, gathered with numpy fancy indexing; a varint's first 8 bytes
in one gather), so events take as many rounds as the busiest has fields; then the stats, the
same way. Proto3 semantics hold because rounds follow each message's byte order: a later
scalar overrides an earlier one, the last oneof member wins, repeated stats keep their order,
unknown fields are skipped by wire type. Events go ``CHUNK`` at a time, which keeps the
rounds' temporaries small.

What the rounds do not decode (a tag over one byte, a group, wire type 6 or 7, field number 0,
a varint over 10 bytes, a length varint over 5 bytes, a field running past the event's end,
invalid UTF-8 in a ``str_value``) marks the event. Marked events are handed to a ``canonical``
callable (upb's own ``XEvent`` parser and serializer) and decoded again from upb's output:
upb decides, as it would have for the whole file, so a damaged event either decodes as upb
reads it or raises ``WireError`` (the caller's ``BadCapture``).

The compiled core (``_native``, built by the set-up from ``_native.c``) does the same in one
pass over the events: ``native()`` is that module where it is built (and not turned off by
``XLAPROF_PURE_DECODER=1``), else None, and then this module's numpy code runs, the reference
the tests hold the compiled one to. Both give the same arrays and mark the same events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

# Zero bytes after the last event: a varint read at an event's last byte stays in the buffer.
PAD = 16
_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
# XStat value kinds: the oneof member's field number (0: the stat has no value).
NONE, DOUBLE, UINT64, INT64, STR, BYTES, REF = 0, 2, 3, 4, 5, 6, 7
_EVENT_FIELDS = {1: _VARINT, 2: _VARINT, 3: _VARINT, 4: _LEN, 5: _VARINT}
_STAT_FIELDS = {1: _VARINT, 2: _FIXED64, 3: _VARINT, 4: _VARINT, 5: _LEN, 6: _LEN, 7: _VARINT}
_EVENTS_TAG = 4 << 3 | _LEN  # XLine.events
_MARK, _SKIP = -1, 0  # tag table entries besides field numbers


_NATIVE: list[ModuleType | None] = []  # the compiled core, once looked up


def native(pure: bool = False) -> ModuleType | None:
    """The compiled decoder core, or None where it is not built (logged once a process), where
    ``pure`` or where ``XLAPROF_PURE_DECODER`` is set (then the numpy decoder runs, which the
    tests compare it to)."""
    import os

    if pure or os.environ.get("XLAPROF_PURE_DECODER"):
        return None
    if not _NATIVE:
        import importlib

        _native: ModuleType | None
        try:
            _native = importlib.import_module("xlaprof.parse.xplane._native")
        except ImportError:
            import logging

            logging.getLogger(__name__).warning(
                "xlaprof: the compiled xplane decoder is not built (no C compiler at install?); "
                "decoding with numpy, several times slower"
            )
            _native = None
        _NATIVE.append(_native)
    return _NATIVE[0]


def take(values: np.ndarray, index: np.ndarray, clip: bool = False) -> np.ndarray:
    """``values.take(index)`` (``mode="clip"`` where ``clip``), by the compiled core where it
    is built and the arrays are plain (``_native.c``'s ``take``): numpy first copies an index
    that is not intp (the frame's row orders are int32, its codes int8 to int32) into one that
    is, 8 bytes an event of new memory and a cast on every gather of a million-row column
    (indexing, ``values[index]``, casts it piece by piece: 2-2.5x the core's time on int8 or
    int16 codes, 3.7M rows)."""
    core = native()
    found = None if core is None else core.take(values, index, clip)
    if found is None:
        found = values.take(index, mode="clip" if clip else "raise")
    return found


class WireError(ValueError):
    """Event bytes that upb rejects too (the capture is corrupt)."""


def _tag_table(fields: dict[int, int]) -> np.ndarray:
    """Per one-byte tag: the field number when known with its wire type, _SKIP for a field
    to step over (unknown, or a known number with another wire type: upb keeps those as
    unknown fields), _MARK for what the rounds leave to upb (see the module docstring)."""
    table = np.full(256, _MARK, np.int8)
    for tag in range(128):
        number, wire = tag >> 3, tag & 7
        if number and wire in (_VARINT, _FIXED64, _LEN, _FIXED32):
            table[tag] = number if fields.get(number) == wire else _SKIP
    return table


_EVENT_TAGS = _tag_table(_EVENT_FIELDS)
_STAT_TAGS = _tag_table(_STAT_FIELDS)


class Buffer:
    """Bytes to decode (at least ``PAD`` bytes after the last event), seen both as bytes and as the
    little-endian uint64 starting at each byte: one gather reads 8 bytes from anywhere."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.bytes = np.frombuffer(data, np.uint8)
        self.words = np.ndarray((len(data) - 7,), "<u8", buffer=data, strides=(1,))


_HIGH_BITS = 0x8080808080808080
_LOW_BITS = 0x7F7F7F7F7F7F7F7F


def varints(buffer: Buffer, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints starting at positions ``at``: see ``_varints``."""
    values, sizes, _ = _varints(buffer, at)
    return values, sizes


def _varints(
    buffer: Buffer, at: np.ndarray, window: np.ndarray | None = None, short: bool = False
) -> tuple[np.ndarray, np.ndarray, bool]:
    """The varints starting at positions ``at``: values (uint64, bits past 64 dropped, as
    upb does) and sizes in bytes (11 where no byte of the first 10 ends the varint).

    Each varint's first 8 bytes are read as one word: its size is where the first byte without
    a continuation bit is, and its value the low 7 bits of each byte up to there, packed
    together in three shift steps. Varints longer than 8 bytes (negative int64s) read on; the
    flag says whether any did. ``window``: the word that ends at each varint's 7th byte (a
    round's tag and what follows it, read at once), so varints of up to 7 bytes are read from
    it and only longer ones from the buffer again. ``short``: the varints are likely at most
    2 bytes (ids, lengths), which is then checked for first.
    """
    if window is None:
        word = buffer.words[at]
        ends = _HIGH_BITS
    else:
        word = window >> 8
        ends = _HIGH_BITS >> 8  # its top byte is not the varint's
    if not (word & 0x80).any():  # all one byte: most tags, ids and lengths
        return word & 0x7F, np.ones(len(at), np.uint8), False
    if short and window is not None and not (word & 0x8000 & (word << 8)).any():
        # None longer than 2 bytes (ids past 127, short lengths): the second byte where the
        # first goes on.
        second = word >> 1
        second &= 0x3F80
        second *= (word >> 7) & 1
        sizes = ((word >> 7) & 1).astype(np.uint8)
        sizes += 1
        word &= 0x7F
        word |= second
        return word, sizes, False
    last = np.invert(word)
    last &= ends  # the bytes that can end a varint, by their high bit
    last &= -last  # the first of them (0: none in 8 bytes)
    longer = np.flatnonzero(last == 0)
    last -= 1  # the bits below it: the varint's bits and its continuation bits
    word &= last
    # Its size: one more than the continuation bits, added up bytewise by a multiplication.
    last >>= 7
    last &= 0x0101010101010101
    last *= 0x0101010101010101
    last >>= 56
    sizes = last.astype(np.uint8)
    sizes += 1
    word &= _LOW_BITS
    # Pack 8 groups of 7 bits: pairs of bytes, then of 14-bit, then of 28-bit groups.
    for mask, shift in ((0x7F007F007F007F00, 1), (0x3FFF00003FFF0000, 2), (0x0FFFFFFF00000000, 4)):
        high = word & mask
        word ^= high
        high >>= shift
        word |= high
    if longer.size and window is not None:  # over 7 bytes: from the buffer, as any varint
        value, size, _ = _varints(buffer, at[longer])
        word[longer], sizes[longer] = value, size
    elif longer.size:
        value, size = word[longer], sizes[longer]
        size[:] = 11
        going = np.arange(len(longer))
        for index in (8, 9):
            byte = buffer.bytes[at[longer[going]] + index]
            value[going] |= (byte & 0x7F).astype(np.uint64) << (7 * index)
            done = byte < 0x80
            size[going[done]] = index + 1
            going = going[~done]
        word[longer], sizes[longer] = value, size
    return word, sizes, bool(longer.size)


class Truncated(ValueError):
    """Bytes that end inside a varint."""


def read_varint(data: bytes, position: int) -> tuple[int, int]:
    """The one varint at ``data[position:]``, and the position after it: the scalar form of
    ``varints`` (the same rule: at most 10 bytes, bits past 64 dropped, as upb does), for the
    few fields read outside the event rounds (a file's outer layer, an HLO proto's name).
    ``Truncated`` when the data ends inside it, ``ValueError`` when it runs past 10 bytes."""
    value = shift = 0
    while True:
        if position >= len(data):
            raise Truncated("truncated varint")
        if shift > 63:
            raise ValueError("a varint over 10 bytes")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, position
        shift += 7


def varint_sizes(values: np.ndarray) -> np.ndarray:
    """Bytes each non-negative value takes as a varint."""
    sizes = np.ones(len(values), np.int64)
    top = int(values.max()) if len(values) else 0
    for bits in range(7, 64, 7):
        if top < 1 << bits:
            break
        sizes += values >= (1 << bits)
    return sizes


# visit(number, rows, value, payload, end): one field (its number) of each message in rows.
Visit = Callable[[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]


# Messages walked at once: bounds the temporaries of a round (a few arrays of this length),
# small enough to stay in the CPU's caches between a round's steps (on a 1M-event capture, 2^14
# walked ~20% faster than 2^18; below 2^13 the rounds' Python overhead takes over).
CHUNK = 1 << 14


def walk(
    buffer: Buffer, starts: np.ndarray, ends: np.ndarray, table: np.ndarray, visit: Visit
) -> np.ndarray:
    """Read the messages at ``buffer[starts:ends]`` field by field, in rounds; return a mask of
    the messages marked (see the module docstring), whose later fields are not visited.

    Per round and tag, ``visit(number, rows, value, payload, end)`` gets the messages (rows)
    whose next field has that tag, the varint after the tag (a length-delimited field's
    length), where the field's payload begins and where it ends. A round's messages mostly
    share one tag (producers write fields in order), which is then taken without a copy.
    ``CHUNK`` messages are walked at a time: a message's fields are visited in their order.
    """
    marked = np.zeros(len(starts), bool)
    for first in range(0, len(starts), CHUNK):
        chunk = slice(first, first + CHUNK)
        marked[chunk] = _walk_chunk(buffer, starts[chunk], ends[chunk], first, table, visit)
    return marked


def _walk_chunk(
    buffer: Buffer,
    starts: np.ndarray,
    ends: np.ndarray,
    first: int,
    table: np.ndarray,
    visit: Visit,
) -> np.ndarray:
    """One chunk of ``walk``: the messages still going are kept packed (their index, where
    their next field is, where they end), so a round reads and writes only arrays of its own
    length, and a round whose messages share one tag (the common case) takes them whole."""
    marked = np.zeros(len(starts), bool)
    rows = np.flatnonzero(starts < ends)
    at, limit = starts[rows], ends[rows]
    rows += first
    while rows.size:
        window = buffer.words[at]  # the tag and the 7 bytes after it: one read for both
        tags = window.astype(np.uint8)
        at = at + 1  # after the tag (a new array: a visitor may keep the last round's ends)
        present = _distinct_bytes(tags)
        if len(present) == 1:
            stop, bad = _field(buffer, present[0], table, rows, at, limit, window, visit)
        else:
            stop, bad = np.empty_like(at), np.zeros(len(rows), bool)
            for tag in present:
                chosen = np.flatnonzero(tags == tag)
                found, wrong = _field(
                    buffer,
                    tag,
                    table,
                    rows[chosen],
                    at[chosen],
                    limit[chosen],
                    window[chosen],
                    visit,
                )
                stop[chosen] = found
                if wrong is not None:
                    bad[chosen] = wrong
        going = stop < limit
        if bad is not None and bad.any():
            marked[rows[bad] - first] = True
            going &= ~bad
        if going.all():
            at = stop
        else:
            rows, at, limit = rows[going], stop[going], limit[going]
    return marked


def _distinct_bytes(values: np.ndarray) -> list[int]:
    """The distinct values of a uint8 array, in order. (Marking them in a table of 256 is
    several times faster than ``np.bincount`` where most values are one: bincount adds to the
    same counter again and again.)"""
    seen = np.zeros(256, bool)
    seen[values] = True
    found: list[int] = np.flatnonzero(seen).tolist()
    return found


def _field(
    buffer: Buffer,
    tag: int,
    table: np.ndarray,
    rows: np.ndarray,
    start: np.ndarray,
    room: np.ndarray,
    window: np.ndarray,
    visit: Visit,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The field with one-byte ``tag`` of each message in ``rows`` (``start``: after the tag,
    ``room``: where the message ends): where the field ends, and which messages it marks
    (None: none). The well-formed ones are visited, unless the table skips the field."""
    number, wire = int(table[tag]), tag & 7
    if number == _MARK:
        return start, np.ones(len(rows), bool)
    if wire in (_FIXED64, _FIXED32):
        value = np.zeros(len(start), np.uint64)
        payload = start
        stop = start + (8 if wire == _FIXED64 else 4)
        wrong = stop > room
    else:
        value, size, long = _varints(buffer, start, window, number == 1 or wire == _LEN)
        payload = start + size
        if wire == _VARINT:
            stop = payload
            wrong = stop > room
            if long:
                wrong |= size > 10
        else:  # the payload must end within the message (a length over 5 bytes is wrong)
            end = value.astype(np.int64)
            end += payload
            wrong = end > room
            wrong |= size > 5
            stop = end.astype(payload.dtype) if not wrong.any() else np.where(wrong, payload, end)
    if not wrong.any():
        if number:
            visit(number, rows, value, payload, stop)
        return stop, None
    if number:
        fine = ~wrong
        visit(number, rows[fine], value[fine], payload[fine], stop[fine])
    return stop, wrong


@dataclass
class Stats:
    """Every event's stats as one table, in event order then wire order.

    ``kind`` is the value's oneof member (``NONE`` ... ``REF``); ``raw`` holds a varint as
    uint64, a double's bits, or for ``STR``/``BYTES`` an index into ``texts``/``hexes`` (the
    distinct strings, and ``bytes.hex()`` of the distinct bytes values).
    """

    event: np.ndarray
    metadata_id: np.ndarray
    kind: np.ndarray
    raw: np.ndarray
    texts: list[str] = field(default_factory=list)
    hexes: list[str] = field(default_factory=list)


class Events:
    """The decoded fields of each event (proto3 defaults where absent) and their stats;
    ``first_stat[i]:first_stat[i + 1]`` are event i's rows of ``stats``.

    ``first_stat`` given as None is made from the stats' event numbers when first read
    (``first_stats``), int64 where ``wide_first``, else int32: the compiled decoder leaves it
    to then, so that it is not in memory beside the file's bytes and the events' positions
    (the decode's high point)."""

    def __init__(
        self,
        metadata_id: np.ndarray,
        offset_ps: np.ndarray,
        duration_ps: np.ndarray,
        first_stat: np.ndarray | None,
        stats: Stats,
        wide_first: bool = False,
    ) -> None:
        self.metadata_id = metadata_id
        self.offset_ps = offset_ps
        self.duration_ps = duration_ps
        self._first_stat = first_stat
        self.stats = stats
        self.wide_first = wide_first

    @property
    def first_stat(self) -> np.ndarray:
        if self._first_stat is None:
            count = len(self.metadata_id)
            self._first_stat = first_stats(self.stats.event, count, self.wide_first)
        return self._first_stat

    @first_stat.setter
    def first_stat(self, value: np.ndarray) -> None:
        self._first_stat = value

    def take(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Stats]:
        """The fields, which this then no longer holds: each is freed as soon as its taker
        drops it, whoever still holds this."""
        taken = (self.metadata_id, self.offset_ps, self.duration_ps, self.first_stat, self.stats)
        empty = np.zeros(0, np.int64)
        self.metadata_id = self.offset_ps = self.duration_ps = self.first_stat = empty
        self.stats = Stats(empty, empty, np.zeros(0, np.uint8), np.zeros(0, np.uint64))
        return taken


# The bytes a releasing decode gives back at once, at least (``decode_events``): one call to
# the kernel a chunk, not one an event.
RELEASE_CHUNK = 8 << 20


def first_stats(event: np.ndarray, count: int, wide: bool, pure: bool = False) -> np.ndarray:
    """For each of ``count`` events, the row of its first stat among the stats whose event
    numbers are ``event`` (in order), and their count last: int64 where ``wide``, else int32.
    By the compiled core where it is built (one pass, no row-long temporary), else numpy."""
    core = native(pure)
    if core is not None:
        found: np.ndarray = core.firsts(event, count, wide)
        return found
    first = np.zeros(count + 1, np.int64 if wide else np.int32)
    np.cumsum(np.bincount(event, minlength=count), out=first[1:])
    return first


def split_space(
    space: Any, raw: bytes | None = None, pure: bool = False
) -> tuple[bytes, np.ndarray, np.ndarray]:
    """Every event of a shadow ``XSpace`` (events as bytes) in one buffer, at least ``PAD``
    bytes after the last, and where each event's bytes begin and end; events in plane, line,
    event order, over the lines that have events. (With the compiled core, ``raw`` itself
    wherever its walk of the file finds what upb found: the core needs no padding.)

    Given ``raw``, the bytes upb parsed the space from, the buffer is those bytes wherever they
    are laid out as producers write them (``_in_place``), and the space is left as it is.
    Otherwise the space is emptied of all else (read what you need first) and re-serialized
    by upb: that is each plane's, line's and event's tag and length, then the event's bytes, so
    where each event lies follows from the lengths alone. Only those come through Python
    (``map(len, ...)``, one short-lived bytes object an event), no copy of every event's bytes
    to join. The layout is checked (sizes, and each event's tag); where it does not hold, the
    events are joined from their bytes instead.
    """
    if raw is not None:
        core = native(pure)
        found = _located(core, space, raw) if core is not None else _in_place(space, raw)
        if found is not None:
            return found
    lines = _keep_events_only(space)
    if not lines:
        return bytes(PAD), np.zeros(0, np.int64), np.zeros(0, np.int64)
    # The padding is a last field of the space (a hostname of PAD zero bytes, after the
    # planes): upb writes it, and the buffer is upb's output as it is, not a copy with more.
    space.hostnames.append("\0" * PAD)
    sizes = [np.fromiter(map(len, line.events), np.int64, len(line.events)) for line in lines]
    heads = [1 + varint_sizes(size) for size in sizes]
    line_sizes = [int(size.sum() + head.sum()) for size, head in zip(sizes, heads, strict=True)]
    begins, position, line = [], 0, 0
    for plane in space.planes:
        inner = line_sizes[line : line + len(plane.lines)]
        position += 1 + _varint_size(sum(1 + _varint_size(size) + size for size in inner))
        for size in inner:
            position += 1 + _varint_size(size)  # the line's tag and length
            ends_in_line = np.cumsum(heads[line] + sizes[line])
            begins.append(position + ends_in_line - sizes[line])
            position += size
            line += 1
    index = np.int32 if position < 2**31 - 64 else np.int64  # positions: half the memory
    starts = np.concatenate(begins, dtype=index)
    ends = starts + np.concatenate(sizes, dtype=index)
    data = space.SerializeToString()
    tags = np.frombuffer(data, np.uint8)[starts - np.concatenate(heads, dtype=index)]
    if len(data) != position + 2 + PAD or not (tags == _EVENTS_TAG).all():
        return _joined(lines)
    return data, starts, ends


def _located(core: ModuleType, space: Any, raw: bytes) -> tuple[bytes, Any, Any] | None:
    """``_in_place`` by the compiled core: it walks the file's planes, lines and events in C
    (``_native.locate``), and the events it found per line are checked against upb's count
    (one ``len`` a line). None where the walk or the counts do not hold (``_in_place`` then
    tries)."""
    found = core.locate(raw)
    if found is None:
        return None
    starts, ends, plane_lines, line_events = found
    if plane_lines != [len(plane.lines) for plane in space.planes]:
        return None
    if line_events != [len(line.events) for plane in space.planes for line in plane.lines]:
        return None
    return raw, starts, ends


def _in_place(space: Any, raw: bytes) -> tuple[bytes, np.ndarray, np.ndarray] | None:
    """Where each event of ``space`` lies in ``raw``, the file's bytes upb parsed it from, and
    ``raw`` itself (a copy with ``PAD`` zero bytes more where its last event ends nearer its
    end); None where the file is not laid out as producers write it.

    The outer layers (planes and lines: a few fields each, up to the last line with events)
    are walked in Python. A line's events are taken to be one run of ``XLine.events`` fields;
    upb gives their lengths (``map(len, ...)``), so where each lies follows from where the
    first does. That is checked: each event's one-byte tag and its length varint (of its
    minimal size) must be where the run puts them, and no events field may follow the run.
    Cheaper than ``SerializeToString``, in which upb's encoder writes the whole file again.
    """
    index = np.int32 if len(raw) < 2**31 - 64 else np.int64  # as split_space's
    wanted: dict[int, dict[int, np.ndarray]] = {}  # plane -> line -> its events' sizes
    for plane_index, plane in enumerate(space.planes):
        lines = {
            line_index: np.fromiter(map(len, line.events), index, len(line.events))
            for line_index, line in enumerate(plane.lines)
            if line.events
        }
        if lines:
            wanted[plane_index] = lines
    try:
        runs = _runs_of_space(raw, wanted)
    except (_NotLaidOut, Truncated, ValueError):
        return None
    counts = np.array([len(sizes) for _, sizes, _ in runs])
    size = np.concatenate([sizes for _, sizes, _ in runs])
    head = np.concatenate([heads for _, _, heads in runs])
    span = np.add(head, size)
    # Each event's tag: where it is in its line's run (plus the runs before), moved to where
    # its line's first event is.
    at: np.ndarray = np.cumsum(span, dtype=index)
    np.subtract(at, span, out=at)
    firsts = np.cumsum(counts) - counts
    np.add(at, np.repeat(np.array([run[0] for run in runs], index) - at[firsts], counts), out=at)
    starts = np.add(at, head)
    ends = np.add(starts, size)
    # The file's own bytes, where the last event is followed by PAD more (a copy otherwise).
    data = raw if len(raw) - int(ends.max()) >= PAD else raw + bytes(PAD)
    if not _heads_hold(Buffer(data), at, size, head):
        return None
    return data, starts, ends


def _runs_of_space(raw: bytes, wanted: dict[int, dict[int, np.ndarray]]) -> list[_Run]:
    """``_runs_of_plane`` of each plane in ``wanted`` (plane index -> line index -> sizes)."""
    if not wanted:
        raise _NotLaidOut("no events")
    runs: list[_Run] = []
    last_plane, plane_index = max(wanted), -1
    for tag, begin, end in _fields(raw, 0, len(raw)):
        if tag == _PLANES_TAG:
            plane_index += 1
            if plane_index in wanted:
                runs.extend(_runs_of_plane(raw, begin, end, wanted[plane_index]))
            if plane_index == last_plane:
                return runs
    raise _NotLaidOut("fewer planes than upb read")


def _heads_hold(buffer: Buffer, at: np.ndarray, size: np.ndarray, head: np.ndarray) -> bool:
    """Whether an events tag and a length varint of ``size`` (in ``head - 1`` bytes) are at
    each of ``at``: the byte after the tag is the length's first (its low 7 bits, and a
    continuation bit where it goes on), and the longer lengths are read in full."""
    if not (buffer.bytes[at] == _EVENTS_TAG).all():
        return False
    first = (size & 0x7F).astype(np.uint8)
    longer = np.flatnonzero(head > 2)
    first[longer] |= 0x80
    if not (buffer.bytes[at + 1] == first).all():
        return False
    if not len(longer):
        return True
    lengths, length_sizes = varints(buffer, at[longer] + 1)
    return bool((lengths == size[longer]).all() and (length_sizes == head[longer] - 1).all())


class _NotLaidOut(ValueError):
    """The file's bytes are not where ``_in_place`` looks for them."""


_PLANES_TAG = 1 << 3 | _LEN  # XSpace.planes
_LINES_TAG = 3 << 3 | _LEN  # XPlane.lines
# A line's run of events: where its first event's tag is, each event's size, and the size of
# its tag and length varint.
_Run = tuple[int, np.ndarray, np.ndarray]


def _runs_of_plane(raw: bytes, begin: int, end: int, lines: dict[int, np.ndarray]) -> list[_Run]:
    """The runs of events of ``lines`` (line index -> its events' sizes), in line order."""
    runs, line_index, last_line = [], -1, max(lines)
    for tag, line_begin, line_end in _fields(raw, begin, end):
        if tag == _LINES_TAG:
            line_index += 1
            size = lines.get(line_index)
            if size is not None:
                head = (varint_sizes(size) + 1).astype(size.dtype)
                span = int(size.sum(dtype=np.int64) + head.sum(dtype=np.int64))
                runs.append((_run_of_events(raw, line_begin, line_end, span), size, head))
            if line_index == last_line:
                return runs
    raise _NotLaidOut("fewer lines than upb read")


def _run_of_events(raw: bytes, begin: int, end: int, span: int) -> int:
    """Where the first events field of one line is, taking its events (``span`` bytes, tags
    included) to be one run: found by walking the line's fields up to it. No events field may
    follow the run."""
    position = begin
    while position < end:
        tag, _, stop = _outer_field(raw, position, end)
        if tag == _EVENTS_TAG:
            if raw[position] != _EVENTS_TAG:  # a tag written in more than one byte
                raise _NotLaidOut("a long tag")
            after = position + span
            if after > end or any(later == _EVENTS_TAG for later, _, _ in _fields(raw, after, end)):
                raise _NotLaidOut("events not in one run")
            return position
        position = stop
    raise _NotLaidOut("no events where upb read some")


def _fields(raw: bytes, begin: int, end: int) -> Iterator[tuple[int, int, int]]:
    """``_outer_field`` of each field of the message at ``raw[begin:end]``, in order."""
    position = begin
    while position < end:
        tag, payload, position = _outer_field(raw, position, end)
        yield tag, payload, position


def _outer_field(raw: bytes, position: int, end: int) -> tuple[int, int, int]:
    """The field at ``raw[position:]``: its tag, where its payload begins and where it ends.
    ``_NotLaidOut`` where it runs past ``end`` or is a group (a wire type the schema lacks)."""
    tag, after = read_varint(raw, position)
    wire = tag & 7
    if wire == _VARINT:
        stop = read_varint(raw, after)[1]
    elif wire in (_FIXED64, _FIXED32):
        stop = after + (8 if wire == _FIXED64 else 4)
    elif wire == _LEN:
        size, after = read_varint(raw, after)
        stop = after + size
    else:
        raise _NotLaidOut(f"wire type {wire}")
    if stop > end:
        raise _NotLaidOut("a field past its message")
    return tag, after, stop


def _keep_events_only(space: Any) -> list[Any]:
    """Empty ``space`` of all but its lines' events (lines without events, planes without
    lines, every other field and unknown fields); the lines left, in plane and line order."""
    lines = []
    for plane_index in reversed(range(len(space.planes))):
        plane = space.planes[plane_index]
        for line_index in reversed(range(len(plane.lines))):
            if not plane.lines[line_index].events:
                del plane.lines[line_index]
        if not plane.lines:
            del space.planes[plane_index]
    for plane in space.planes:
        _clear_all_but(plane, "lines")
        for line in plane.lines:
            _clear_all_but(line, "events")
            lines.append(line)
    _clear_all_but(space, "planes")
    space.DiscardUnknownFields()
    return lines


def _joined(lines: list[Any]) -> tuple[bytes, np.ndarray, np.ndarray]:
    """The lines' events joined from their bytes (a copy each), ``PAD`` zero bytes after them,
    and where each begins and ends: where upb's layout is not what ``split_space`` expects."""
    pieces = [event for line in lines for event in line.events]
    sizes = np.fromiter(map(len, pieces), np.int64, len(pieces))
    ends = np.cumsum(sizes)
    return b"".join(pieces) + bytes(PAD), ends - sizes, ends


def _clear_all_but(message: Any, keep: str) -> None:
    for descriptor, _ in message.ListFields():
        if descriptor.name != keep:
            message.ClearField(descriptor.name)


def _varint_size(value: int) -> int:
    return max(1, -(-value.bit_length() // 7))


def decode_events(
    data: Any,
    starts: np.ndarray,
    ends: np.ndarray,
    canonical: Callable[[bytes], bytes],
    release: bool = False,
) -> Events | None:
    """The events at ``data[starts:ends]`` (``data`` going on ``PAD`` bytes past the last:
    zero bytes, or more of the file).

    ``canonical(raw)`` re-encodes one event as upb reads it, raising ``WireError`` where upb
    rejects it; it is called only for marked events (see the module docstring).
    ``release``: the compiled core gives ``data`` (an anonymous map) back to the kernel as it
    passes it, ``RELEASE_CHUNK`` bytes at a time (``decode_arrays``); None where an event is
    marked then, whose bytes are gone: the caller reads them anew and decodes without.
    """
    events, rows = decode_arrays(data, starts, ends, release=RELEASE_CHUNK if release else 0)
    if not len(rows):
        return events
    if release:
        return None
    pieces = [canonical(data[a:b]) for a, b in zip(starts[rows], ends[rows], strict=True)]
    sizes = np.fromiter(map(len, pieces), np.int64, len(pieces))
    base = len(data)  # upb's events go after all else, and PAD zero bytes after them
    starts, ends = starts.astype(np.int64), ends.astype(np.int64)  # (int32 may not hold them)
    ends[rows] = base + np.cumsum(sizes)
    starts[rows] = ends[rows] - sizes
    events, marked = decode_arrays(data + b"".join(pieces) + bytes(PAD), starts, ends)
    if len(marked):  # upb's own encoding is always in the rounds' reach
        raise WireError("an event upb re-encoded still does not decode")
    return events


def decode_arrays(
    data: Any, starts: np.ndarray, ends: np.ndarray, pure: bool = False, release: int = 0
) -> tuple[Events, np.ndarray]:
    """The events at ``data[starts:ends]`` as arrays, and the numbers of those marked (int64,
    in order; see the module docstring): by the compiled core where it is built (no padding
    needed; each event's first stat made when first read, ``Events``), else (or ``pure``) by
    the numpy rounds (``PAD`` bytes after the last event needed). ``release`` > 0: the core
    gives ``data`` (a writable buffer: an anonymous map) back to the kernel as it passes it,
    that many bytes or more at a time, where the events lie in order; those bytes then read as
    zeros (the numpy rounds keep it)."""
    core = native(pure)
    if core is None:
        events, marked = _decode_numpy(data, starts, ends)
        return events, np.flatnonzero(marked)
    (metadata_id, offset_ps, duration_ps, _, event, stat_id, kind, raw, texts, hexes) = (
        found := core.decode(data, starts, ends, release)
    )[:10]
    stats = Stats(event, stat_id, kind, raw, texts, hexes)
    wide = len(data) >= 2**31 - 64  # as _narrowed's first_stat
    return Events(metadata_id, offset_ps, duration_ps, None, stats, wide), found[10]


def _decode_numpy(data: bytes, starts: np.ndarray, ends: np.ndarray) -> tuple[Events, np.ndarray]:
    buffer = Buffer(data)
    count = len(starts)
    metadata_id = np.zeros(count, np.int64)
    offset_ps = np.zeros(count, np.int64)
    duration_ps = np.zeros(count, np.int64)
    stat_count = np.zeros(count, np.int32)
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    targets = {1: metadata_id, 2: offset_ps, 3: duration_ps}

    def visit(number: int, rows: np.ndarray, value: np.ndarray, payload: Any, end: Any) -> None:
        if number in targets:
            targets[number][rows] = value.view(np.int64)
        elif number == 5:
            offset_ps[rows] = 0  # num_occurrences took the oneof: offset_ps reads 0
        else:  # 4: a stat
            found.append((rows, stat_count[rows], payload, end))
            stat_count[rows] += 1

    marked = walk(buffer, starts, ends, _EVENT_TAGS, visit)
    first_stat = np.zeros(count + 1, np.int64)
    np.cumsum(stat_count, out=first_stat[1:])
    total = int(first_stat[-1])
    event = np.empty(total, np.int64)
    stat_starts = np.empty(total, starts.dtype)
    stat_ends = np.empty(total, starts.dtype)
    for rows, rank, payload, end in found:
        slot = first_stat[rows] + rank
        event[slot], stat_starts[slot], stat_ends[slot] = rows, payload, end
    stats, bad_stats = _decode_stats(buffer, event, stat_starts, stat_ends)
    marked[event[bad_stats]] = True
    events = Events(metadata_id, offset_ps, duration_ps, first_stat, stats)
    return _narrowed(events, len(data)), marked


def _narrowed(events: Events, size: int) -> Events:
    """``events`` (decoded from ``size`` bytes) with the widths the compiled core gives
    (``_native.c``'s ``decode``): the stats' event numbers int32 where there are fewer than
    2**31 events, ``first_stat`` where the bytes are short of 2**31 - 64 (a stat takes two or
    more), each metadata id array where every id in it fits int32."""
    small = np.iinfo(np.int32)

    def fitting(ids: np.ndarray) -> np.ndarray:
        fits = not len(ids) or (small.min <= ids.min() and ids.max() <= small.max)
        return ids.astype(np.int32) if fits else ids

    stats = events.stats
    if len(events.metadata_id) <= small.max:
        stats.event = stats.event.astype(np.int32)
    if size < 2**31 - 64:
        events.first_stat = events.first_stat.astype(np.int32)
    events.metadata_id = fitting(events.metadata_id)
    stats.metadata_id = fitting(stats.metadata_id)
    return events


def _decode_stats(
    buffer: Buffer, event: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[Stats, np.ndarray]:
    count = len(starts)
    stats = Stats(
        event=event,
        metadata_id=np.zeros(count, np.int64),
        kind=np.zeros(count, np.uint8),
        raw=np.zeros(count, np.uint64),
    )
    invalid = np.zeros(count, bool)  # a str_value that is not UTF-8: upb rejects the file
    texts: dict[bytes, int] = {}
    hexes: dict[bytes, int] = {}
    data = buffer.data

    plain = _plain_stats(buffer, starts, ends, stats)
    rest = np.flatnonzero(~plain)  # the stats the rounds read

    def visit(number: int, rows: np.ndarray, value: np.ndarray, payload: Any, end: Any) -> None:
        rows = rest[rows]
        if number == 1:
            stats.metadata_id[rows] = value.view(np.int64)
        elif number in (UINT64, INT64, REF):
            stats.kind[rows], stats.raw[rows] = number, value
        elif number == DOUBLE:
            stats.kind[rows] = DOUBLE
            stats.raw[rows] = buffer.words[payload]
        else:  # STR, BYTES: an index into the distinct values
            seen, strings = (texts, stats.texts) if number == STR else (hexes, stats.hexes)
            keys = np.zeros(len(rows), np.uint64)
            for index, (a, b) in enumerate(zip(payload.tolist(), end.tolist(), strict=True)):
                chunk = data[a:b]
                key = seen.get(chunk)
                if key is None:
                    try:
                        strings.append(chunk.decode() if number == STR else chunk.hex())
                    except UnicodeDecodeError:
                        invalid[rows[index]] = True
                        continue
                    key = seen[chunk] = len(strings) - 1
                keys[index] = key
            stats.kind[rows], stats.raw[rows] = number, keys

    marked = np.zeros(count, bool)
    marked[rest] = walk(buffer, starts[rest], ends[rest], _STAT_TAGS, visit)
    return stats, marked | invalid


# Per one-byte tag after a stat's metadata_id, the kind of a value read without the rounds:
# a varint (uint64, int64, ref) or a double; 0 for the rest (text, bytes, anything else).
_PLAIN_VALUES = np.zeros(256, np.uint8)
for _number, _wire in ((UINT64, _VARINT), (INT64, _VARINT), (REF, _VARINT), (DOUBLE, _FIXED64)):
    _PLAIN_VALUES[_number << 3 | _wire] = _number
_PLAIN_ID = 1 << 3 | _VARINT  # XStat.metadata_id's tag
# The bytes of a word past a stat's 5th value byte: continuation bits, so none of them ends it.
_FAKE_CONTINUATION = 0x8080 << 48


def _plain_stats(buffer: Buffer, starts: np.ndarray, ends: np.ndarray, stats: Stats) -> np.ndarray:
    """Mark the stats laid out as producers write numbers, and fill their rows of ``stats``:
    a one-byte metadata_id, then one numeric value (a varint or a double) up to the stat's
    end, or no value at all. Most stats are such; one word read at each stat's start holds its
    tags, its id and most varints, so they take a few passes instead of two rounds. (Two fields
    in that order leave nothing to the proto3 rules the rounds follow: the value is the one.)
    """
    plain = np.zeros(len(starts), bool)
    for first in range(0, len(starts), CHUNK):
        at, end = starts[first : first + CHUNK], ends[first : first + CHUNK]
        word = buffer.words[at]
        size = end - at
        metadata_id = (word >> 8) & 0xFF
        kind = _PLAIN_VALUES[(word >> 16) & 0xFF]
        value, value_size, _ = _varints(buffer, at + 3, (word >> 16) | _FAKE_CONTINUATION)
        fits = np.where(kind == DOUBLE, 8, value_size) == size - 3
        fits &= kind > 0
        fits &= value_size <= 10  # (11: no end in 10 bytes, which upb rejects)
        fits |= size == 2  # no value
        fits &= (word & 0xFF) == _PLAIN_ID
        fits &= metadata_id < 0x80
        kind[size == 2] = NONE
        doubles = np.flatnonzero(fits & (kind == DOUBLE))
        value[doubles] = buffer.words[at[doubles] + 3]
        value[kind == NONE] = 0
        plain[first : first + len(at)] = fits
        if fits.all():  # (the common case: copies, not scatters)
            chunk = slice(first, first + len(at))
            stats.metadata_id[chunk], stats.kind[chunk], stats.raw[chunk] = metadata_id, kind, value
            continue
        rows = np.flatnonzero(fits)
        stats.metadata_id[first + rows] = metadata_id[rows]
        stats.kind[first + rows] = kind[rows]
        stats.raw[first + rows] = value[rows]
    return plain


_NAME = 8  # a ref_value that names a stat of the plane (a kind of StatValues' own)
# The numeric kinds: the dtype their 8 raw bytes hold.
_NUMBER_TYPES = {INT64: np.int64, UINT64: np.uint64, DOUBLE: np.float64}
_INT64_MAX = 2**63 - 1


class StatValues:
    """Rows of ``Stats`` as the Python values upb's messages give (``schema.stat_value``),
    converted once per distinct value rather than once per row.

    ``names`` are the stat names; ``ref_name`` is, per row, the index in ``names`` of the stat
    a ``ref_value`` refers to (-1 where it refers to none: the value is then the number).
    """

    def __init__(self, stats: Stats, names: list[str], ref_name: np.ndarray) -> None:
        self.stats = stats
        self.names = names
        self.ref_name = ref_name

    def slim(self) -> StatValues:
        """These values without their rows' event numbers and metadata ids (16 bytes a row):
        what reads values by row needs, once the rows' events are placed."""
        empty = np.zeros(0, np.int64)
        stats = self.stats
        kept = Stats(empty, empty, stats.kind, stats.raw, stats.texts, stats.hexes)
        return StatValues(kept, self.names, self.ref_name)

    def subset(self, kept: np.ndarray) -> StatValues:
        """These values of the rows ``kept`` (a mask) alone, in their order: with ``slim``'s
        rows (no event numbers or metadata ids), the texts and names shared."""
        empty = np.zeros(0, np.int64)
        stats = self.stats
        rows = Stats(empty, empty, stats.kind[kept], stats.raw[kept], stats.texts, stats.hexes)
        return StatValues(rows, self.names, self.ref_name[kept])

    def _groups(self, rows: np.ndarray) -> list[tuple[np.ndarray, int, np.ndarray]]:
        """``(positions in rows, kind, keys)`` per kind: within a kind, equal keys are equal
        values (a double's bits, so -0.0 and NaNs stay apart; _NAME: the index in names)."""
        kinds = self.stats.kind[rows]
        raw = self.stats.raw[rows]
        groups = []
        for kind in _distinct_bytes(kinds):
            chosen = np.flatnonzero(kinds == kind)
            keys = raw[chosen]
            if kind == REF:
                names = self.ref_name[rows[chosen]]
                named = names >= 0
                if named.any():
                    groups.append((chosen[named], _NAME, names[named].astype(np.uint64)))
                chosen, keys, kind = chosen[~named], keys[~named], UINT64
            if chosen.size:
                groups.append((chosen, kind, keys))
        return groups

    def _python(self, kind: int, keys: np.ndarray) -> list[Any]:
        number_type = _NUMBER_TYPES.get(kind)
        if number_type is not None:
            numbers: list[Any] = keys.view(number_type).tolist()
            return numbers
        table = {STR: self.stats.texts, BYTES: self.stats.hexes, _NAME: self.names}.get(kind)
        if table is None:
            return [None] * len(keys)
        return [table[key] for key in keys.tolist()]

    def _each(self, rows: np.ndarray, convert: Callable[[Any], Any], dtype: Any) -> np.ndarray:
        """``convert(value)`` per row, called once per distinct value."""
        import pandas as pd

        out = np.empty(len(rows), dtype)
        for chosen, kind, keys in self._groups(rows):
            codes, distinct = pd.factorize(keys)
            converted = [convert(value) for value in self._python(kind, distinct)]
            out[chosen] = np.array(converted, dtype)[codes]
        return out

    def objects(self, rows: np.ndarray) -> np.ndarray:
        """The rows' values as Python objects (an object array)."""
        return self._each(rows, lambda value: value, object)

    def codes(self, rows: np.ndarray, convert: Callable[[Any], int]) -> np.ndarray:
        """``convert(value)`` per row as int64: a string's code in a table of the caller's."""
        return self._each(rows, convert, np.int64)

    def floats(self, rows: np.ndarray, convert: Callable[[Any], float]) -> np.ndarray:
        """``convert(value)`` per row as float64: numbers cast as Python's ``float()`` does."""
        out = np.empty(len(rows), np.float64)
        for chosen, kind, keys in self._groups(rows):
            if kind == INT64:
                out[chosen] = keys.view(np.int64)
            elif kind == UINT64:
                out[chosen] = keys
            elif kind == DOUBLE:
                out[chosen] = keys.view(np.float64)
            else:
                out[chosen] = self._each(rows[chosen], convert, np.float64)
        return out

    def integers(
        self, rows: np.ndarray, convert: Callable[[Any], int | None]
    ) -> tuple[np.ndarray, np.ndarray]:
        """``convert(value)`` per row as int64 and a mask of the rows where it is None; whole
        numbers within +-(2^63 - 1) are kept, as ``events.step_number`` keeps them."""
        values = np.zeros(len(rows), np.int64)
        missing = np.ones(len(rows), bool)
        for chosen, kind, keys in self._groups(rows):
            if kind == INT64:
                number = keys.view(np.int64)
                valid = number != np.iinfo(np.int64).min
            elif kind == UINT64:
                number = keys.view(np.int64)
                valid = keys <= _INT64_MAX
            elif kind == DOUBLE:
                real = keys.view(np.float64)
                # Floats strictly inside +-2^63 are whole numbers within +-(2^63 - 1).
                valid = np.isfinite(real) & (real == np.floor(real))
                valid &= (real > -(2.0**63)) & (real < 2.0**63)
                number = np.where(valid, real, 0).astype(np.int64)
            else:
                found = self._each(rows[chosen], convert, object)
                valid = np.array([value is not None for value in found], bool)
                number = np.where(valid, found, 0).astype(np.int64)
            values[chosen] = np.where(valid, number, 0)
            missing[chosen] = ~valid
        return values, missing
