"""The compiled decoder core (``xlaprof/parse/xplane/_native.c``) against the numpy decoder.

The numpy decoder (``wire.decode_arrays``, ``wire.split_space`` and ``frame.event_times`` with
``pure=True``) is the reference: itself held to upb's own decoding (test_wire.py), it is what runs
where the core is not built, and ``XLAPROF_PURE_DECODER=1`` turns the core off. Every real
capture at hand must give the same frame both ways (columns, dtypes, values, order, ``attrs``,
``args``); arbitrary, truncated and mutated bytes must give the same arrays, or the same
error, without reading past what they were given and without allocating from a length field.
"""

from __future__ import annotations

import mmap
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import hypothesis
import numpy as np
import pandas as pd
import pytest
from builders import tag, varint
from fuzzing import mutate_bytes, time_limit
from helpers import DATA, REPO, TRACES
from hypothesis import strategies as st

from xlaprof.errors import XlaprofError
from xlaprof.parse.xplane import frame as frame_module
from xlaprof.parse.xplane import wire, xspace_frame
from xlaprof.parse.xplane.schema import canonical_event, message_class

core = wire.native()
pytestmark = pytest.mark.skipif(
    core is None, reason="the compiled decoder is not built (setup.py build_ext --inplace)"
)

# Every xplane capture at hand: the sample traces', the shared real ones', the fuzzing's
# reproducers.
REAL = sorted(
    {
        *REPO.glob("sample_traces/**/*.xplane.pb"),
        *TRACES.glob("**/*.xplane.pb"),
        *DATA.glob("fuzz_repro/**/*.xplane.pb"),
    }
)


def _both(path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes | None = None) -> list[Any]:
    """``xspace_frame`` of ``path`` with the core and with numpy: a frame, or the error's
    type and text. The core's decode, reading the file itself, gives its bytes back a page at
    a time, whatever the file's size (it does from ``frame.RELEASE_FROM`` bytes on, 512 MB,
    ``wire.RELEASE_CHUNK`` at a time, 8 MB: more than any of these files)."""
    monkeypatch.setattr(frame_module, "RELEASE_FROM", 0)
    monkeypatch.setattr(wire, "RELEASE_CHUNK", mmap.PAGESIZE)
    found = []
    for pure in ("", "1"):
        monkeypatch.setenv("XLAPROF_PURE_DECODER", pure)
        try:
            found.append(xspace_frame(path, data=data))
        except XlaprofError as error:
            found.append((type(error), str(error)))
    return found


def _args(frame: pd.DataFrame) -> list[str]:
    # repr: a NaN in a dict is not equal to itself. The rows are read in one pass (tolist), not
    # one .iloc each, which costs seconds on a capture of ~100 thousand events.
    return [repr(row) for row in frame["args"].tolist()]


def _assert_same(found: list[Any]) -> None:
    native, numpy = found
    if isinstance(native, pd.DataFrame) and isinstance(numpy, pd.DataFrame):
        # Every column but args by pandas; args (dicts, compared by pandas one row at a time)
        # by its dtype and each row's repr, which also tells a NaN from a NaN-free dict.
        pd.testing.assert_frame_equal(native.drop(columns="args"), numpy.drop(columns="args"))
        assert list(native.columns) == list(numpy.columns)
        assert native["args"].dtype == numpy["args"].dtype
        assert native.attrs.keys() == numpy.attrs.keys()
        assert repr(native.attrs) == repr(numpy.attrs)
        assert _args(native) == _args(numpy)
    else:
        assert native == numpy


def test_there_are_real_captures() -> None:
    assert len([p for p in REAL if TRACES in p.parents]) >= 6
    assert len([p for p in REAL if REPO / "sample_traces" in p.parents]) >= 10


@pytest.mark.parametrize("path", REAL, ids=[str(p.relative_to(p.parents[2])) for p in REAL])
def test_real_captures_decode_the_same(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_same(_both(path, monkeypatch))


def test_a_synthetic_host_of_many_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmarks' input (copies of a real CPU capture), smaller: lines of thousands."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from trace_load import synthesize

    path = tmp_path / "host.xplane.pb"
    synthesize(path, 30_000)
    found = _both(path, monkeypatch)
    _assert_same(found)
    assert len(found[0]) >= 30_000


def test_without_the_core_the_numpy_decoder_runs_and_says_so_once() -> None:
    """A process in which the core does not import: decoding works, and one line says why it
    is slower (however many captures it decodes)."""
    code = (
        "import sys; sys.modules['xlaprof.parse.xplane._native'] = None\n"
        "from xlaprof.parse.xplane import wire, xspace_frame\n"
        "assert wire.native() is None and wire.native() is None\n"
        f"for _ in range(3): xspace_frame({str(REAL[0])!r})\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    said = [line for line in done.stderr.splitlines() if "compiled xplane decoder" in line]
    assert len(said) == 1, done.stderr


# -- the event decoder on arbitrary bytes ---------------------------------------------------------
def _values(stats: wire.Stats, row: int) -> tuple[int, int, object]:
    """One stat row as (metadata_id, kind, value): a text's or bytes' value itself (the two
    decoders number distinct strings in different orders)."""
    kind = int(stats.kind[row])
    raw = int(stats.raw[row])
    value: object = raw
    if kind == wire.STR:
        value = stats.texts[raw]
    elif kind == wire.BYTES:
        value = stats.hexes[raw]
    return int(stats.metadata_id[row]), kind, value


def _assert_same_events(data: bytes, starts: np.ndarray, ends: np.ndarray) -> None:
    """The core's arrays and marks are the numpy decoder's, event by event: every field of an
    unmarked event and its stats; which events are marked (those go to upb)."""
    padded = data + bytes(wire.PAD)  # the numpy decoder reads up to PAD bytes past an event
    numpy, numpy_marked = wire.decode_arrays(padded, starts, ends, pure=True)
    found = core.decode(data, starts, ends)
    assert found[3] is None  # each event's first stat: made from the stats' event numbers
    native = wire.Events(*found[:4], wire.Stats(*found[4:10]))
    np.testing.assert_array_equal(found[10], numpy_marked)
    assert found[10].dtype == numpy_marked.dtype == np.int64
    keep = np.ones(len(starts), bool)
    keep[numpy_marked] = False
    for name in ("metadata_id", "offset_ps", "duration_ps"):
        np.testing.assert_array_equal(getattr(native, name)[keep], getattr(numpy, name)[keep])
    for event in np.flatnonzero(keep):
        mine = range(native.first_stat[event], native.first_stat[event + 1])
        theirs = range(numpy.first_stat[event], numpy.first_stat[event + 1])
        assert [_values(native.stats, r) for r in mine] == [_values(numpy.stats, r) for r in theirs]
        assert (native.stats.event[list(mine)] == event).all()
    if not len(numpy_marked):  # (a marked event's fields, read partly, may widen either side)
        for name in ("metadata_id", "first_stat"):
            assert getattr(native, name).dtype == getattr(numpy, name).dtype
        for name in ("event", "metadata_id"):
            assert getattr(native.stats, name).dtype == getattr(numpy.stats, name).dtype


def _stat_bytes(metadata_id: int) -> bytes:
    stat = _field(1, 0, varint(metadata_id)) + _field(3, 0, varint(5))
    return _field(4, 2, varint(len(stat)) + stat)


@pytest.mark.parametrize("pure", [False, True])
def test_indexes_and_ids_are_int32_where_they_fit(pure: bool) -> None:
    """The stats' event numbers and first_stat as int32 (a short buffer), each array of
    metadata ids as int32 where every id in it fits (two's complement: 2**64 - 1 is -1), else
    int64 with the ids exact; by the core and by numpy alike."""

    def decoded(event_ids: list[int], stat_ids: list[int]) -> wire.Events:
        pairs = zip(event_ids, stat_ids, strict=True)
        events = [_field(1, 0, varint(e)) + _stat_bytes(s) for e, s in pairs]
        ends = np.cumsum([len(e) for e in events], dtype=np.int64)
        data = b"".join(events) + (bytes(wire.PAD) if pure else b"")
        found, marked = wire.decode_arrays(data, ends - [len(e) for e in events], ends, pure)
        assert not len(marked)
        return found

    small = decoded([3, 2**31 - 1, 2**64 - 1], [7, 2**64 - 2**31, 0])
    assert small.metadata_id.dtype == np.int32 and small.metadata_id.tolist() == [3, 2**31 - 1, -1]
    assert small.stats.metadata_id.dtype == np.int32
    assert small.stats.metadata_id.tolist() == [7, -(2**31), 0]
    assert small.first_stat.dtype == np.int32 and small.first_stat.tolist() == [0, 1, 2, 3]
    assert small.stats.event.dtype == np.int32 and small.stats.event.tolist() == [0, 1, 2]

    wide = decoded([1, 2**31], [2**63, 4])
    assert wide.metadata_id.dtype == np.int64 and wide.metadata_id.tolist() == [1, 2**31]
    assert wide.stats.metadata_id.dtype == np.int64
    assert wide.stats.metadata_id.tolist() == [-(2**63), 4]
    assert wide.stats.event.dtype == np.int32


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    return tag(number, wire_type) + payload


_numbers = st.one_of(
    st.integers(0, 300),
    st.integers(0, 2**64 - 1),
    st.sampled_from([0, 1, 127, 128, 2**31, 2**63 - 1, 2**63, 2**64 - 1]),
)
_text = st.one_of(st.text(max_size=12), st.binary(max_size=12))


@st.composite
def _stat(draw: st.DrawFn) -> bytes:
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        number = draw(st.integers(1, 8))
        if number in (5, 6):
            value = draw(_text)
            raw = value.encode() if isinstance(value, str) else value
            parts.append(_field(number, 2, varint(len(raw)) + raw))
        elif number == 2:
            parts.append(_field(2, 1, draw(st.binary(min_size=8, max_size=8))))
        else:
            parts.append(_field(number, 0, varint(draw(_numbers))))
    return b"".join(parts)


@st.composite
def _event(draw: st.DrawFn) -> bytes:
    """An XEvent's bytes: its fields in any order, known and unknown, well formed or not."""
    parts = []
    for _ in range(draw(st.integers(0, 6))):
        choice = draw(st.integers(0, 9))
        if choice <= 3:
            parts.append(_field(draw(st.sampled_from([1, 2, 3, 5])), 0, varint(draw(_numbers))))
        elif choice <= 6:
            stat = draw(_stat())
            parts.append(_field(4, 2, varint(len(stat)) + stat))
        elif choice == 7:  # an unknown or mistyped field
            number = draw(st.integers(1, 20))
            wire_type = draw(st.sampled_from([0, 1, 2, 5]))
            payload = {0: b"\x01", 1: bytes(8), 2: b"\x02ab", 5: bytes(4)}[wire_type]
            parts.append(_field(number, wire_type, payload))
        else:  # raw bytes: groups, long tags, lengths past the end, truncated varints
            parts.append(draw(st.binary(max_size=12)))
    event = b"".join(parts)
    if draw(st.booleans()) and event:
        event = event[: draw(st.integers(0, len(event)))]  # cut anywhere
    return event


@hypothesis.settings(max_examples=400, deadline=None)
@hypothesis.given(st.lists(_event(), max_size=8), st.binary(max_size=16))
def test_events_decode_as_numpy_does(events: list[bytes], tail: bytes) -> None:
    """Arbitrary events, side by side in one buffer (then bytes that are no event): the same
    arrays, the same marks. The core reads no byte past an event's end: the numpy decoder's
    padding is not given to it, and what follows each event is another event or ``tail``."""
    ends = np.cumsum([len(e) for e in events], dtype=np.int64)
    starts = ends - np.array([len(e) for e in events], np.int64)
    _assert_same_events(b"".join(events) + tail, starts, ends)


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(st.lists(_event(), min_size=1, max_size=6))
def test_decode_events_gives_the_numpy_result_or_the_same_error(events: list[bytes]) -> None:
    """Through upb's re-encoding of what neither decodes itself: equal events, or the same
    ``WireError`` (as upb rejects the event)."""
    data = b"".join(events)
    ends = np.cumsum([len(e) for e in events], dtype=np.int64)
    starts = ends - np.array([len(e) for e in events], np.int64)
    results = []
    for pure in ("", "1"):
        buffer = data + bytes(wire.PAD) if pure else data
        with pytest.MonkeyPatch.context() as monkeypatch:
            monkeypatch.setenv("XLAPROF_PURE_DECODER", pure)
            try:
                decoded = wire.decode_events(buffer, starts, ends, canonical_event)
            except wire.WireError as error:
                results.append(("WireError", str(error)))
                continue
        results.append(
            (
                decoded.metadata_id.tolist(),
                decoded.offset_ps.tolist(),
                decoded.duration_ps.tolist(),
                decoded.first_stat.tolist(),
                [_values(decoded.stats, r) for r in range(len(decoded.stats.kind))],
            )
        )
    assert results[0] == results[1]


def test_a_length_field_allocates_nothing() -> None:
    """Stats that claim lengths of up to 2^35 bytes, and a million events of two bytes: what
    the core allocates follows what it was given, not what a length says."""
    hostile = _field(4, 2, varint(2**35 - 1)) + b"\x0a"
    tiny = b"\x08\x01"
    data = hostile * 1000 + tiny * 1_000_000
    sizes = np.array([len(hostile)] * 1000 + [len(tiny)] * 1_000_000, np.int64)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    tracemalloc.start()
    try:
        found = core.decode(data, starts, ends)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found[10].tolist() == list(range(1000))  # the hostile ones are left to upb
    assert peak < 100 * len(data)  # ~40 bytes of arrays an event


def test_positions_outside_the_data_are_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        core.decode(b"\x08\x01", np.array([0], np.int64), np.array([3], np.int64))
    with pytest.raises(ValueError, match="outside"):
        core.decode(b"\x08\x01", np.array([-1], np.int64), np.array([1], np.int64))
    with pytest.raises(TypeError):
        core.decode(b"\x08\x01", np.array([0.0]), np.array([1.0]))


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(
    st.lists(st.integers(0, 6), max_size=40), st.integers(0, 3), st.booleans(), st.booleans()
)
def test_first_stats_are_where_each_events_stats_begin(
    owners: list[int], more: int, wide: bool, small_numbers: bool
) -> None:
    """Each event's first row among its stats, made from the stats' event numbers (in order,
    events with none between): by the core as by numpy, and as counting them says, in the
    width asked for (``more`` events after the last stat's, which have none)."""
    owners.sort()
    event = np.array(owners, np.int32 if small_numbers else np.int64)
    count = (max(owners) + 1 if owners else 0) + more
    expected = [sum(1 for owner in owners if owner < e) for e in range(count + 1)]
    for pure in (False, True):
        found = wire.first_stats(event, count, wide, pure)
        assert found.dtype == (np.int64 if wide else np.int32)
        assert found.tolist() == expected


def test_first_stats_refuse_event_numbers_out_of_order_or_range() -> None:
    """Event numbers that fall, are negative or name no event: an error, not rows that
    overlap or run past the stats."""
    for owners, count in (([1, 0], 2), ([-1, 0], 2), ([0, 2], 2)):
        with pytest.raises(ValueError, match="out of order or range"):
            core.firsts(np.array(owners, np.int32), count, False)
    with pytest.raises(ValueError, match="negative"):
        core.firsts(np.zeros(0, np.int32), -1, False)


def test_a_releasing_decode_gives_the_same_arrays_and_the_passed_pages_back() -> None:
    """The core's decode over an anonymous map, giving it back a page at a time: the arrays of
    the decode that keeps its bytes; after it, the pages below the last event's start read as
    zeros (given back to the kernel, on Linux: a private map's pages are then freed) and the
    rest as they were. A buffer that is not writable (bytes) is not given back: refused."""
    raw = max(REAL, key=lambda p: p.stat().st_size).read_bytes()
    found = core.skeleton(raw)
    assert found is not None
    _, starts, ends, _ = found
    kept = core.decode(raw, starts, ends)
    mapped = mmap.mmap(-1, len(raw), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    mapped[:] = raw
    given = core.decode(mapped, starts, ends, mmap.PAGESIZE)
    for mine, theirs in zip(given, kept, strict=True):
        if isinstance(mine, np.ndarray):
            assert mine.dtype == theirs.dtype
            np.testing.assert_array_equal(mine, theirs)
        else:
            assert mine == theirs
    last = int(starts[-1])
    passed = last - last % mmap.PAGESIZE
    assert passed > 0
    if sys.platform.startswith("linux"):
        assert mapped[:passed].count(0) == passed
    assert mapped[passed:] == raw[passed:]
    with pytest.raises(BufferError):
        core.decode(raw, starts, ends, mmap.PAGESIZE)


def _counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The frame's reads of a capture from here on, each as whether it was mapped."""
    reads: list[bool] = []
    real_read = frame_module.read_capture

    def counting(*args: Any, **kwargs: Any) -> Any:
        reads.append(bool(kwargs.get("mapped")))
        return real_read(*args, **kwargs)

    monkeypatch.setattr(frame_module, "read_capture", counting)
    return reads


def test_a_marked_event_of_a_released_file_is_read_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capture with an event the core leaves to upb (an unknown field of a two-byte tag), far
    enough in that the decode has given pages back before it: the file is read again as bytes
    and decoded as from bytes, to the numpy decoder's frame."""
    space = message_class("XSpace", events_as_bytes=True)()
    plane = space.planes.add()
    plane.id, plane.name = 1, "/host:CPU"
    plane.event_metadata[1].id = 1
    plane.event_metadata[1].name = "op"
    line = plane.lines.add()
    line.id, line.name, line.timestamp_ns = 1, "main", 1000
    event_class = message_class("XEvent", events_as_bytes=False)
    for i in range(3000):  # ~10 pages of events
        event = event_class(metadata_id=1, offset_ps=1000 * i, duration_ps=500)
        raw = event.SerializeToString()
        line.events.append(raw + (b"\xa0\x01\x01" if i == 2500 else b""))  # field 20: 1
    path = tmp_path / "marked.xplane.pb"
    path.write_bytes(space.SerializeToString())
    reads = _counted_reads(monkeypatch)
    native, numpy = _both(path, monkeypatch)
    _assert_same([native, numpy])
    assert len(native) == 3000
    assert reads == [True, False, False]  # mapped, read anew as bytes; numpy's own read


def test_a_mapped_file_the_core_cannot_walk_is_read_anew_as_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file read into a map whose events the core's walk cannot find (bytes that are no
    capture): the map let go and the file read anew as bytes for upb, which names what is
    wrong, as without the map; not a copy of the map beside it (a large file twice)."""
    path = tmp_path / "junk.xplane.pb"
    path.write_bytes(random.Random(7).randbytes(50_000))
    reads = _counted_reads(monkeypatch)
    native, numpy = _both(path, monkeypatch)
    _assert_same([native, numpy])
    assert isinstance(native, tuple) and issubclass(native[0], XlaprofError)
    assert reads == [True, False, False]  # mapped, read anew as bytes; numpy's own read


# -- whole files: cut, mutated, arbitrary --------------------------------------------------------
_SMALL = [p for p in REAL if p.stat().st_size < 300_000 and TRACES in p.parents]


@hypothesis.settings(max_examples=120, deadline=None)
@hypothesis.given(st.integers(0, 2**32 - 1), st.sampled_from(_SMALL or REAL[:1]))
def test_mutated_captures_decode_the_same_or_fail_the_same(
    tmp_path_factory: pytest.TempPathFactory, seed: int, source: Path
) -> None:
    """A real capture cut, or with bytes flipped, dropped, repeated (the fuzzer's mutations):
    the same frame both ways, or the same one-line error; within a time limit. Given as bytes,
    and as a file the core reads itself (its decode giving the bytes back as it goes; the
    events a mutation marks for upb then read anew)."""
    rng = random.Random(seed)
    data = source.read_bytes()
    data = data[: rng.randrange(len(data))] if rng.random() < 0.3 else mutate_bytes(rng, data)
    path = tmp_path_factory.mktemp("mutated") / source.name
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as monkeypatch, time_limit(60):
        _assert_same(_both(source, monkeypatch, data=data))
        _assert_same(_both(path, monkeypatch))


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(st.binary(max_size=200))
def test_arbitrary_bytes_locate_or_refuse(data: bytes) -> None:
    """``locate`` on any bytes: None, or events that lie within the bytes, in order."""
    found = core.locate(data)
    if found is None:
        return
    starts, ends, plane_lines, line_events = found
    assert len(starts) == len(ends) == sum(line_events)
    assert len(line_events) == sum(plane_lines)
    assert ((starts >= 0) & (starts <= ends) & (ends <= len(data))).all()
    assert (starts[1:] >= ends[:-1]).all()


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(st.binary(max_size=200))
def test_arbitrary_bytes_have_a_skeleton_or_none(data: bytes) -> None:
    """``skeleton`` on any bytes: None, or no larger than the bytes, with events that lie
    within them, in order, counted per line."""
    found = core.skeleton(data)
    if found is None:
        return
    bones, starts, ends, line_events = found
    assert len(bones) <= len(data)
    assert len(starts) == len(ends) == sum(line_events)
    assert ((starts >= 0) & (starts <= ends) & (ends <= len(data))).all()
    assert (starts[1:] >= ends[:-1]).all()


def test_the_skeleton_is_the_capture_without_its_events() -> None:
    """upb reads the same planes, lines and metadata from the skeleton as from the file, and
    the events the skeleton locates are the bytes upb read as events."""
    from xlaprof.parse.xplane.schema import message_class

    for path in REAL:
        raw = path.read_bytes()
        full = message_class("XSpace", events_as_bytes=True)()
        try:
            full.ParseFromString(raw)
        except Exception:  # (a reproducer of a corrupt file)
            continue
        found = core.skeleton(raw)
        assert found is not None, path
        bones, starts, ends, line_events = found
        assert [raw[a:b] for a, b in zip(starts, ends, strict=True)] == [
            event for plane in full.planes for line in plane.lines for event in line.events
        ]
        assert line_events == [len(line.events) for plane in full.planes for line in plane.lines]
        for plane in full.planes:
            for line in plane.lines:
                del line.events[:]
        assert full.SerializeToString() == type(full).FromString(bones).SerializeToString()


# -- the time merge --------------------------------------------------------------------------------
_offsets = st.one_of(
    st.integers(-(2**62), 2**62),
    st.integers(-5000, 5000),
    st.sampled_from([0, -1, 999, 1000, -999, -1000, 2**62, -(2**62), 2**63 - 1, -(2**63)]),
)
_stamps = st.one_of(st.integers(0, 10**6), st.integers(-(2**53), 2**53), st.just(2**62))


@hypothesis.settings(max_examples=400, deadline=None)
@hypothesis.given(
    st.lists(
        st.tuples(
            _stamps,
            st.lists(st.tuples(_offsets, st.one_of(_offsets, st.integers(0, 10**6))), max_size=12),
            st.booleans(),
        ),
        max_size=6,
    )
)
def test_event_times_are_the_numpy_columns(lines: list[Any]) -> None:
    """Lines of events (each line's time base in ns, its events' offsets and durations in ps;
    in time order or not, times in range or not): the same columns and order either way (the
    core merges where every event is kept and each line is in order, else numpy sorts)."""
    stamps = np.array([stamp for stamp, _, _ in lines], np.int64)
    counts = np.array([len(events) for _, events, _ in lines], np.int64)
    pairs = [sorted(events) if ordered else events for _, events, ordered in lines]
    offset = np.array([o for events in pairs for o, _ in events], np.int64).reshape(-1)
    duration = np.array([d for events in pairs for _, d in events], np.int64).reshape(-1)
    native, native_order = frame_module.event_times(offset, duration, stamps, counts)
    numpy, numpy_order = frame_module.event_times(offset, duration, stamps, counts, pure=True)
    np.testing.assert_array_equal(native_order, numpy_order)
    assert native.keys() == numpy.keys()
    for key, column in numpy.items():
        assert native[key].dtype == column.dtype
        np.testing.assert_array_equal(native[key], column)


def test_event_times_merge_long_lines() -> None:
    """Lines of thousands of events, interleaved in time, with ties across lines (which go to
    the earlier line, as a stable sort puts them): the merge is the sort."""
    rng = np.random.default_rng(7)
    counts = np.array([5000, 1, 0, 3000, 2500], np.int64)
    offset = np.concatenate([np.sort(rng.integers(0, 10**7, n)) * 1000 for n in counts])
    duration = rng.integers(0, 10**6, len(offset))
    stamps = np.array([10**9, 10**9 + 3, 10**9, 10**9 - 5, 10**9], np.int64)
    native, native_order = frame_module.event_times(offset, duration, stamps, counts)
    numpy, numpy_order = frame_module.event_times(offset, duration, stamps, counts, pure=True)
    np.testing.assert_array_equal(native_order, numpy_order)
    for key, column in numpy.items():
        np.testing.assert_array_equal(native[key], column)


# -- the nesting walk --------------------------------------------------------------------------
_bounds = st.one_of(
    st.integers(-50, 50),
    st.integers(-(2**62), 2**62),
    st.sampled_from([0, 2**63 - 1, -(2**63), 2**62, -(2**62)]),
)


@hypothesis.settings(max_examples=400, deadline=None)
@hypothesis.given(st.lists(st.tuples(_bounds, st.one_of(st.integers(0, 60), _bounds)), max_size=40))
def test_nesting_walks_as_python_does(events: list[tuple[int, int]]) -> None:
    """One line's events (any order, lengths in range of int64 or not): the same self times and
    parents with the core's walk as with the Python one (the core leaves to Python lengths
    that do not fit int64)."""
    import os

    from xlaprof.tables.intervals import nesting

    starts = np.array([start for start, _ in events], np.int64).reshape(-1)
    ends = np.array(
        [min(max(start + length, -(2**63)), 2**63 - 1) for start, length in events], np.int64
    ).reshape(-1)
    found = nesting(starts, ends)
    os.environ["XLAPROF_PURE_DECODER"] = "1"
    try:
        expected = nesting(starts, ends)
    finally:
        del os.environ["XLAPROF_PURE_DECODER"]
    assert found[1].tolist() == expected[1].tolist()
    np.testing.assert_array_equal(found[0], expected[0])


# -- the gather ------------------------------------------------------------------------------
_VALUE_TYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "float32", "int64", "float64"]
_INDEX_TYPES = ["int16", "int32", "int64", "intp", "uint32", "int8", "float64"]


@hypothesis.settings(max_examples=400, deadline=None)
@hypothesis.given(
    st.sampled_from(_VALUE_TYPES),
    st.sampled_from(_INDEX_TYPES),
    st.lists(st.integers(-(2**15), 2**15 - 1), max_size=30),
    st.lists(st.integers(-70, 70), max_size=40),
    st.booleans(),
    st.booleans(),
)
def test_take_is_numpys_take(
    value_type: str,
    index_type: str,
    values: list[int],
    index: list[int],
    clip: bool,
    strided: bool,
) -> None:
    """``wire.take`` against numpy's ``take`` (``mode="clip"`` or ``"raise"``) on any values
    and index, in range or not (negative ones count from the end): the same array and dtype,
    or IndexError both ways. The core takes plain 1-d contiguous arrays with a signed integer
    index; for the rest (a strided view, an unsigned or float index) it gives None and numpy
    answers."""
    source = np.array(values, np.int64).astype(value_type)
    if strided:
        source = np.repeat(source, 2)[::2]  # the same values, not contiguous
    where = np.array(index, np.int64)
    if np.dtype(index_type).kind == "u":
        where = np.abs(where)
    where = where.astype(index_type)
    mode = "clip" if clip else "raise"
    try:
        expected = source.take(where, mode=mode)
    except (IndexError, TypeError) as error:
        with pytest.raises(type(error)):
            wire.take(source, where, clip)
        return
    found = wire.take(source, where, clip)
    assert found.dtype == expected.dtype
    np.testing.assert_array_equal(found, expected)


def test_take_answers_only_what_it_can_gather() -> None:
    """The core itself: None for what it does not gather (object values, two dimensions, a
    float or unsigned index, a strided view), the gathered array for the rest, whatever the
    width of its index."""
    index = np.array([2, 0, -1], np.int32)
    assert core.take(np.array(["a", "b", "c"], object), index, False) is None
    assert core.take(np.zeros((3, 2)), index, False) is None
    assert core.take(np.arange(3.0), index.astype(np.float64), False) is None
    assert core.take(np.arange(3.0), index.astype(np.uint32), False) is None
    assert core.take(np.arange(6.0)[::2], index, False) is None
    for width in (np.int8, np.int16, np.int32, np.int64):
        found = core.take(np.arange(3.0), index.astype(width), False)
        assert found.tolist() == [2.0, 0.0, 2.0]
