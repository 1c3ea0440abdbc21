"""The numpy XEvent decoder (``xlaprof.parse.xplane.wire``) against upb's own decoding.

Every expected frame is the reference decoder's (``xplane_reference.py``: upb parses the file
into full messages, a Python loop reads every event's fields), so every expected value comes
from protobuf's decoder, not from the code under test. Frames must be equal (columns, dtypes,
values, row order, ``attrs``, the ``args`` dicts) on every real capture at hand, on hand-made
edge cases of the wire format, and on seeded random events; where upb rejects a file, both raise
the same ``BadCapture``.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from builders import tag, varint
from helpers import DATA, REPO, SAMPLE_RUNS, SHARED_XPLANES, sample_capture, shared_trace
from xplane_reference import assert_same

from xlaprof.parse.xplane import schema as xplane
from xlaprof.parse.xplane import xspace_frame
from xlaprof.parse.xplane.wire import PAD as PAD_BYTES
from xlaprof.parse.xplane.wire import Buffer, Truncated, read_varint, varints

# Every real capture at hand, by where it is: the sample runs', the fuzzing's reproducers
# (tests/data/fuzz_repro) and ../shared/traces' (each found by a function that fails, naming
# the file, where it is missing).
REPROS = sorted(p.name for p in (DATA / "fuzz_repro").glob("xplane_*"))
CAPTURES = [
    *(("sample", name) for name in SAMPLE_RUNS),
    *(("repro", name) for name in REPROS),
    *(("shared", name) for name in SHARED_XPLANES),
]


def real_capture(where: str, name: str) -> Path:
    if where == "sample":
        return sample_capture(name)
    if where == "shared":
        return shared_trace(name)
    (path,) = (DATA / "fuzz_repro" / name).glob("plugins/profile/*/*.xplane.pb")
    return path


TEXT = ("hlo_op", "hlo_module", "hlo_category", "program_id")


@pytest.mark.parametrize(("where", "name"), CAPTURES, ids=[f"{w}:{n}" for w, n in CAPTURES])
def test_real_captures_decode_as_upb_does(where: str, name: str) -> None:
    assert_same(real_capture(where, name))


def test_there_are_real_captures_with_device_planes() -> None:
    kinds = set()
    for name in SHARED_XPLANES:
        kinds |= {d["kind"] for d in xspace_frame(shared_trace(name)).attrs["devices"]}
    assert {"TPU", "GPU"} <= kinds


def test_a_synthetic_host_of_many_copies(tmp_path: Path) -> None:
    """The benchmark's input (copies of a real CPU capture), smaller."""
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    from trace_load import synthesize

    path = tmp_path / "host.xplane.pb"
    synthesize(path, 20_000)
    frame = assert_same(path)
    assert len(frame) >= 20_000


# -- wire-format cases, written byte by byte ----------------------------------------------------
def field(number: int, payload: int | bytes | float, wire: int | None = None) -> bytes:
    """One field: an int as a varint, bytes length-delimited, a float as fixed64."""
    if isinstance(payload, bytes):
        return tag(number, 2 if wire is None else wire) + varint(len(payload)) + payload
    if isinstance(payload, float):
        return tag(number, 1) + struct.pack("<d", payload)
    return tag(number, 0 if wire is None else wire) + varint(payload)


STAT_NAMES = {
    1: "hlo_op",
    2: "step_num",
    3: "flops",
    4: "group_id",
    5: "program_id",
    6: "device_duration_ps",
    7: "tf_op",
    8: "hlo_op",  # a second id with the same name
    9: "12",
}


def capture(tmp_path: Path, events: list[bytes], name: str = "case", stamp: int = 1000) -> Path:
    """An XSpace with one host plane and one line holding ``events`` (raw XEvent bytes)."""
    space = xplane.xspace_class()()
    plane = space.planes.add(id=1, name="/host:CPU")
    for key, stat in STAT_NAMES.items():
        plane.stat_metadata[key].id, plane.stat_metadata[key].name = key, stat
    for key, meta in ((1, "first"), (2, "second"), (-3, "negative")):
        plane.event_metadata[key].id, plane.event_metadata[key].name = key, meta
    plane.event_metadata[2].stats.add(metadata_id=3, double_value=2.5)
    plane.lines.add(id=1, name="python", timestamp_ns=stamp)
    line_bytes = space.planes[0].lines[0].SerializeToString()
    line_bytes += b"".join(field(4, event) for event in events)
    plane.ClearField("lines")
    plane_bytes = plane.SerializeToString() + field(3, line_bytes)
    path = tmp_path / f"{name}.xplane.pb"
    path.write_bytes(field(1, plane_bytes))
    return path


def stat(metadata_id: int, *value: bytes) -> bytes:
    return field(4, field(1, metadata_id) + b"".join(value))


OK_CASES: dict[str, list[bytes]] = {
    "plain": [field(1, 1) + field(2, 5) + field(3, 7)],
    "fields in any order, last wins": [field(3, 7) + field(2, 5) + field(1, 2) + field(3, 9)],
    "num_occurrences after offset_ps clears it": [field(2, 5) + field(5, 3) + field(3, 1)],
    "offset_ps after num_occurrences": [field(5, 3) + field(2, 5)],
    "empty event": [b""],
    "negative metadata_id, ten-byte varint": [field(1, -3) + field(2, 1)],
    "unknown fields of each wire type": [
        field(1, 1) + field(9, 5) + field(10, 1.5) + field(11, b"xy") + tag(12, 5) + b"abcd"
    ],
    "known fields with the wrong wire type are unknown": [
        field(1, b"zz") + field(2, 4) + field(4, 7, wire=0) + tag(3, 5) + b"abcd"
    ],
    "an unknown group (upb decides)": [
        field(1, 1) + tag(15, 3) + field(1, 2) + tag(15, 4) + field(2, 6)
    ],
    "a two-byte tag for field 1 (upb decides)": [b"\x88\x00\x02" + field(2, 3)],
    "a field past 15": [field(1, 1) + field(100, 5) + field(2, 3)],
    "two-byte varints, read from the tag's word": [
        field(1, 300) + field(2, 16383) + stat(200, field(4, 129)),
        field(1, 128) + field(2, 127) + stat(1, field(4, 255)),
    ],
    "an overlong but valid varint": [field(1, 1) + tag(2, 0) + b"\x85\x80\x80\x00"],
    "a ten-byte varint with high bits set": [
        field(1, 1) + tag(2, 0) + b"\x81" + b"\xff" * 8 + b"\x7f"
    ],
    "stats of every kind": [
        field(1, 1)
        + stat(1, field(5, "fusion.1 ∑".encode()))
        + stat(3, field(4, -5))
        + stat(6, field(3, 2**64 - 1))
        + stat(7, field(6, b"\x00\xff"))
        + stat(5, field(7, 1))
        + stat(99, field(7, 2**63 + 1))
        + stat(2, field(2, 7.0))
        + stat(4, field(7, 9))
        + stat(9)
    ],
    "a stat's value fields: the last wins": [
        stat(1, field(3, 5) + field(5, b"x") + field(4, 7))
        + stat(5, field(5, b"a") + field(2, -0.0))
    ],
    "two stats of one name: the last wins, in the first's place": [
        stat(1, field(5, b"a")) + stat(3, field(4, 1)) + stat(8, field(5, b"b"))
    ],
    "text stats from numbers": [
        stat(1, field(2, -0.0)) + stat(5, field(2, 1e300)),
        stat(1, field(2, float("nan"))) + stat(5, field(4, -1)),
        stat(1, field(2, 0.0)) + stat(5, field(3, 2**64 - 1)),
        stat(1) + stat(5, field(6, b"\x12")),
    ],
    "numbers from text and refs": [
        stat(3, field(5, b" 12 ")) + stat(6, field(7, 9)),
        stat(3, field(5, b"inf")) + stat(6, field(6, b"\x12\x34")),
        stat(3, field(7, 123)) + stat(6, field(3, 2**63 + 1025)),
        stat(3) + stat(6, field(4, -(2**63))),
    ],
    "step numbers and group ids": [
        stat(2, field(2, 3.0)) + stat(4, field(2, 3.5)),
        stat(2, field(2, 2.0**63)) + stat(4, field(2, -(2.0**63))),
        stat(2, field(3, 2**63)) + stat(4, field(3, 2**63 - 1)),
        stat(2, field(4, -(2**63))) + stat(4, field(4, -(2**63) + 1)),
        stat(2, field(5, b"12")) + stat(4, field(7, 9)),
        stat(2, field(6, b"\x12")) + stat(4, field(5, b"x")),
        stat(2, field(2, float("inf"))) + stat(4),
    ],
    "numeric stats in producers' layout, and the same id past one byte": [
        stat(1, field(4, 2**40))
        + stat(200, field(4, 2**40))
        + stat(3, field(2, 1.5))
        + stat(9)
        + stat(6, field(4, -1))
        + stat(7, field(3, 2**64 - 1))
        + stat(5, field(7, 127))
    ],
    "many stats on one event": [b"".join(stat(k % 10, field(4, k)) for k in range(40))],
    "a dropped event's own stats go with it": [
        field(2, -(2**63))
        + stat(1, field(5, b"gone"))
        + stat(2, field(4, 9))
        + stat(3, field(2, 1.5))
        + stat(7, field(5, b"op_gone")),
        field(2, 5) + stat(1, field(5, b"kept")) + stat(2, field(4, 3)) + stat(7, field(5, b"op")),
        field(2, -(2**63)) + field(3, 5) + stat(1, field(5, b"also")) + stat(7, field(5, b"x")),
        field(2, 7) + stat(7, field(5, b"later")) + stat(7, field(5, b"last")),
    ],
    "events out of range are dropped": [
        field(2, 2**63 - 1),
        field(2, -(2**63)) + field(3, 5),
        field(2, 10) + field(3, -1),
        field(2, 2**62) + field(3, 2**62 + 5),
        field(2, 3) + field(3, 2**63 - 1),
        field(2, 1) + field(3, 2),
    ],
}

BAD_CASES: dict[str, list[bytes]] = {
    "a varint past the event's end": [field(1, 1) + tag(2, 0) + b"\x85\x85"],
    "a length past the event's end": [field(1, 1) + tag(4, 2) + b"\x05\x08\x01"],
    "a stat's length past its end": [field(4, tag(5, 2) + b"\x09abc")],
    "a fixed64 past the end": [field(1, 1) + tag(9, 1) + b"\x00\x00\x00"],
    "a varint of eleven bytes": [field(1, 1) + tag(2, 0) + b"\xff" * 10 + b"\x01"],
    "field number 0": [field(1, 1) + b"\x00\x01"],
    "wire type 7": [field(1, 1) + b"\x0f\x01"],
    "an end-group with no start": [field(1, 1) + tag(9, 4)],
    "a length varint of six bytes": [tag(11, 2) + b"\x80\x80\x80\x80\x80\x00"],
    "invalid UTF-8 in a str_value": [stat(1, field(5, b"\xff\xfe"))],
    "a stat's varint value of eleven bytes": [stat(1, tag(4, 0) + b"\xff" * 10 + b"\x01")],
    "invalid UTF-8 later overridden": [stat(1, field(5, b"\xc3") + field(4, 1))],
}


@pytest.mark.parametrize("case", OK_CASES)
def test_wire_cases_decode_as_upb_does(tmp_path: Path, case: str) -> None:
    got = assert_same(capture(tmp_path, [*OK_CASES[case], field(1, 2) + field(2, 1)]))
    assert isinstance(got, pd.DataFrame)


@pytest.mark.parametrize("case", BAD_CASES)
def test_damaged_events_are_one_line_bad_captures(tmp_path: Path, case: str) -> None:
    path = capture(tmp_path, [field(1, 2) + field(2, 1), *BAD_CASES[case]])
    message = assert_same(path)
    assert isinstance(message, str) and str(path) in message and "\n" not in message


def test_a_frame_without_args_has_the_framework_ops_of_the_kept_events(tmp_path: Path) -> None:
    """``framework_op`` made at the load (a pod's frame, no ``args``) is each kept event's last
    ``tf_op`` as the device model reads it from ``args``; a dropped event's is gone with it."""
    path = capture(tmp_path, OK_CASES["a dropped event's own stats go with it"])
    whole = xspace_frame(path)
    without = xspace_frame(path, args=False, framework_op=True)
    assert whole.attrs["dropped_events"] == without.attrs["dropped_events"] == 2
    expected = [d.get("tf_op") if d else None for d in whole["args"].tolist()]
    assert (
        without["framework_op"].astype(object).where(without["framework_op"].notna(), None).tolist()
        == expected
    )
    assert expected == ["op", "last"]  # (in start order)
    assert without["hlo_op"].tolist() == whole["hlo_op"].tolist() == ["kept", np.nan]


@pytest.mark.parametrize("events", [[], [field(3, 5) + field(2, 2**63 - 1)]])
def test_no_events_or_none_kept_give_an_empty_frame(tmp_path: Path, events: list[bytes]) -> None:
    frame = assert_same(capture(tmp_path, events))
    assert isinstance(frame, pd.DataFrame) and frame.empty


def test_times_past_int64_nanoseconds_are_exact(tmp_path: Path) -> None:
    """Line timestamps far apart: start picoseconds past int64 are dropped, not wrapped."""
    space = xplane.xspace_class()()
    plane = space.planes.add(id=1, name="/device:TPU:0")
    plane.event_metadata[1].name = "op"
    for index, stamp in enumerate((1, 2**62, -(2**62), 10**16)):
        line = plane.lines.add(id=index, name=f"line{index}", timestamp_ns=stamp)
        line.events.add(metadata_id=1, offset_ps=5, duration_ps=7)
        line.events.add(metadata_id=1, offset_ps=-(2**63) + 1, duration_ps=2**63 - 1)
    path = tmp_path / "far.xplane.pb"
    path.write_bytes(space.SerializeToString())
    frame = assert_same(path)
    assert isinstance(frame, pd.DataFrame) and frame.attrs["dropped_events"] > 0


def test_seeded_random_events_decode_as_upb_does(tmp_path: Path) -> None:
    """Random fields (known and unknown numbers, every wire type, cut short or not): the frame
    is upb's, or both raise the same BadCapture."""
    outcomes = {"frame": 0, "bad": 0}
    for seed in range(150):
        rng = random.Random(seed)
        events = [_random_event(rng) for _ in range(rng.randint(1, 6))]
        path = capture(tmp_path, events, name=str(seed))
        result = assert_same(path)
        outcomes["frame" if isinstance(result, pd.DataFrame) else "bad"] += 1
        path.unlink()
    assert outcomes["frame"] > 50 and outcomes["bad"] > 10, outcomes


def test_the_fuzz_suites_mutations_decode_as_upb_does(tmp_path: Path) -> None:
    """Mutations of real captures as ``test_fuzz`` makes them (structured and byte-level)."""
    from fuzzing import mutate_bytes, mutate_xspace, xplane_sources

    originals = [path.read_bytes() for path in xplane_sources()]
    path = tmp_path / "host.xplane.pb"
    for seed in range(60):
        rng = random.Random(seed)
        data = rng.choice(originals)
        if rng.random() < 0.75:
            space = xplane.xspace_class()()
            space.ParseFromString(data)
            mutate_xspace(rng, space)
            data = space.SerializeToString()
        else:
            data = mutate_bytes(rng, data)
        path.write_bytes(data)
        assert_same(path)


def _random_value(rng: random.Random) -> int:
    return rng.choice([0, 1, 127, 128, 2**32, 2**63 - 1, 2**63, 2**64 - 1, -1, -(2**63), 300])


def _random_stat(rng: random.Random) -> bytes:
    out = b""
    for _ in range(rng.randint(0, 3)):
        number = rng.randint(1, 8)
        if number in (2,):
            out += field(2, rng.choice([0.0, -0.0, 1.5, 3.0, float("nan"), 1e19]))
        elif number in (5, 6):
            out += field(number, rng.choice([b"", b"a", "é".encode(), b"12", b"\xff"]))
        else:
            out += field(number, rng.randint(0, 12) if number == 1 else _random_value(rng))
    return out


def _random_event(rng: random.Random) -> bytes:
    out = b""
    for _ in range(rng.randint(0, 6)):
        number = rng.choice([1, 2, 3, 4, 4, 5, 6, 20])
        if number == 4:
            out += field(4, _random_stat(rng))
        elif number == 6:
            out += field(6, rng.choice([b"", b"abc"]))
        else:
            out += field(number, _random_value(rng))
    if out and rng.random() < 0.25:  # damage: cut short, or a stray byte
        out = (
            out[: rng.randrange(len(out))]
            if rng.random() < 0.5
            else out + bytes([rng.randrange(256)])
        )
    return out


# -- the decoder's parts -----------------------------------------------------------------------
def test_varints_report_their_size_and_overlong_ones() -> None:
    numbers = [5, 300, 2**64 - 1, 2**63, 2**56 - 1, 2**56, 2**49, 0]
    data = b"".join(map(varint, numbers)) + b"\x80\x00" + b"\xff" * 10 + b"\x01" + bytes(16)
    at = np.cumsum([0, *(len(varint(n)) for n in numbers), 2])
    values, sizes = varints(Buffer(data), at)
    assert values.tolist() == [*numbers, 0, 2**64 - 1]
    assert sizes.tolist() == [*(len(varint(n)) for n in numbers), 2, 11]
    assert varints(Buffer(bytes(24)), np.arange(3))[0].tolist() == [0, 0, 0]


def test_the_scalar_varint_reads_as_the_rounds_do() -> None:
    """``read_varint`` (a file's outer layer, an HLO proto's fields) keeps the rounds' rule:
    the same values, sizes past 10 bytes refused, and where the bytes end inside one."""
    numbers = [5, 300, 2**64 - 1, 2**63, 2**56 - 1, 2**56, 2**49, 0]
    data = b"".join(map(varint, numbers)) + b"\x80\x00"
    position, found = 0, []
    while position < len(data):
        value, after = read_varint(data, position)
        found.append((value, after - position))
        position = after
    expected, sizes = varints(Buffer(data + bytes(16)), np.cumsum([0, *(s for _, s in found)])[:-1])
    assert found == list(zip(expected.tolist(), sizes.tolist(), strict=True))
    assert [v for v, _ in found] == [*numbers, 0]
    with pytest.raises(Truncated):
        read_varint(b"\x80\x80", 0)
    with pytest.raises(ValueError, match="10 bytes"):
        read_varint(b"\xff" * 11 + b"\x01", 0)


def test_a_field_running_past_its_event_goes_to_upb_and_is_not_read() -> None:
    """The event ends before a varint or a length-delimited field does: ``decode_events`` hands
    it to ``canonical`` (upb, in the package) and decodes what that gives back, never the bytes
    past the event's end; the whole event beside it is read as it is."""
    from xlaprof.parse.xplane.wire import PAD, decode_events

    messages = [
        field(1, 1) + field(2, 300),  # whole
        field(1, 1) + field(2, 300),  # its last byte is cut off below
        field(1, 1) + field(4, b"abcdef"),  # its last byte is cut off below
        field(1, 1) + tag(4, 2) + varint(2**40),  # a length past anything
    ]
    data = b"".join(messages) + bytes(PAD)
    ends = np.cumsum([len(m) for m in messages])
    starts = ends - [len(m) for m in messages]
    ends[1] -= 1
    ends[2] -= 1
    handed: list[bytes] = []

    def canonical(raw: bytes) -> bytes:
        handed.append(raw)
        return field(1, 7) + field(2, 5)  # what upb makes of it, here: metadata 7 at 5 ps

    events = decode_events(data, starts, ends, canonical)
    # THEN exactly the three events that run past their end went to upb, as they are
    assert handed == [data[starts[i] : ends[i]] for i in (1, 2, 3)]
    # AND their fields are upb's: none of the cut varint, the cut stat or the huge length
    assert events.metadata_id.tolist() == [1, 7, 7, 7]
    assert events.offset_ps.tolist() == [300, 5, 5, 5]
    assert np.diff(events.first_stat).tolist() == [0, 0, 0, 0]


class _LaidOutOtherwise:
    """A shadow XSpace that upb serializes with one more field before its planes: not the
    layout ``split_space`` expects of upb's output."""

    def __init__(self, space: Any) -> None:
        self.space = space

    def __getattr__(self, name: str) -> Any:
        return getattr(self.space, name)

    def SerializeToString(self) -> bytes:
        return field(9, b"") + self.space.SerializeToString()


def test_split_space_checks_its_layout_and_else_joins_the_events() -> None:
    """Where upb's re-serialization is not laid out as expected, the events are joined from
    their bytes instead: the same events, in the same order, decoded the same."""
    from xlaprof.parse.xplane import wire as xplane_wire
    from xlaprof.parse.xplane.schema import canonical_event

    path = sample_capture("healthy_loop")

    def shadow() -> Any:
        space = xplane.message_class("XSpace", events_as_bytes=True)()
        space.ParseFromString(path.read_bytes())
        return space

    laid_out = xplane_wire.split_space(shadow())
    data, starts, ends = xplane_wire.split_space(_LaidOutOtherwise(shadow()))
    assert starts[0] == 0 and len(data) == ends[-1] + xplane_wire.PAD  # joined: nothing between
    expected = laid_out[0]
    pieces = [data[a:b] for a, b in zip(starts, ends, strict=True)]
    assert pieces == [expected[a:b] for a, b in zip(laid_out[1], laid_out[2], strict=True)]
    joined = xplane_wire.decode_events(data, starts, ends, canonical_event)
    normal = xplane_wire.decode_events(*laid_out, canonical_event)
    for name in ("metadata_id", "offset_ps", "duration_ps", "first_stat"):
        assert getattr(joined, name).tolist() == getattr(normal, name).tolist(), name


def test_walking_in_chunks_changes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Events are walked CHUNK at a time: chunks far smaller than the captures, same frames."""
    from xlaprof.parse.xplane import wire as xplane_wire

    monkeypatch.setattr(xplane_wire, "CHUNK", 5)
    assert_same(sample_capture("healthy_loop"))
    for name, events in (*OK_CASES.items(), *BAD_CASES.items()):
        assert_same(capture(tmp_path, [*events, *OK_CASES["stats of every kind"]], name=name))


@pytest.mark.parametrize("dense", [-(1 << 62), 1 << 24], ids=["searched", "by-id"])
def test_metadata_lookups_by_id_and_searched_agree(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dense: int
) -> None:
    """Metadata ids are looked up in a table indexed by id where they are dense, else searched
    for: each way alone gives upb's frames (a device capture, a host one, and the hand-made
    cases, whose ids include ones no metadata has and ref values past int64)."""
    from xlaprof.parse.xplane import frame as xplane_frame

    monkeypatch.setattr(xplane_frame, "_DENSE_IDS", dense)
    assert_same(sample_capture("healthy_loop"))
    assert_same(shared_trace(SHARED_XPLANES[0]))
    for name, events in OK_CASES.items():
        assert_same(capture(tmp_path, [*events, *OK_CASES["stats of every kind"]], name=name))


def test_uint64_to_float_rounds_as_python_does() -> None:
    from xlaprof.parse.xplane.wire import UINT64, Stats, StatValues

    values = [2**63 + 1025, 2**64 - 1, 2**53 + 1, 2**63 - 1, 2**64 - 1025]
    stats = Stats(
        event=np.arange(len(values)),
        metadata_id=np.zeros(len(values), np.int64),
        kind=np.full(len(values), UINT64, np.uint8),
        raw=np.array(values, np.uint64),
    )
    floats = StatValues(stats, [], np.full(len(values), -1)).floats(np.arange(len(values)), float)
    assert floats.tolist() == [float(v) for v in values]


def test_args_false_builds_no_dicts_but_keeps_group_id(tmp_path: Path) -> None:
    path = capture(tmp_path, [stat(4, field(4, 17)) + stat(1, field(5, b"op"))])
    frame = xspace_frame(path, args=False)
    assert frame["args"].tolist() == [None]
    assert frame["group_id"].tolist() == [17] and frame["hlo_op"].tolist() == ["op"]


def _layout_of(path: Path, pure: bool = True) -> tuple[bytes, bytes, np.ndarray, np.ndarray]:
    """The file's bytes and what ``split_space`` makes of them: (raw, data, starts, ends); by
    the numpy layout (``pure``) or the compiled core's walk of the file."""
    from xlaprof.parse.xplane import wire as xplane_wire

    raw = path.read_bytes()
    space = xplane.message_class("XSpace", events_as_bytes=True)()
    space.ParseFromString(raw)
    return raw, *xplane_wire.split_space(space, raw, pure=pure)


def _upb_events(raw: bytes) -> list[bytes]:
    space = xplane.message_class("XSpace", events_as_bytes=True)()
    space.ParseFromString(raw)
    return [event for plane in space.planes for line in plane.lines for event in line.events]


def _line_of(events: list[bytes], between: bytes = b"", last: bytes = b"") -> bytes:
    """An XLine's bytes: a name, the events (``between`` after the first), then ``last``."""
    pieces = [field(4, event) for event in events]
    return field(2, b"line") + pieces[0] + between + b"".join(pieces[1:]) + last


def _space_of(line: bytes, tail: bytes = b"") -> bytes:
    plane = field(1, 1) + field(2, b"/host:CPU") + field(3, field(3, 1000) + line)
    return field(1, plane) + tail


_EVENTS = [field(1, 1) + field(2, 5) + field(3, 7), field(1, 1) + field(2, 9) + stat(3)]


def test_events_are_read_where_they_lie_in_the_file(tmp_path: Path) -> None:
    """A line's events in one run (as producers write them) are decoded from the file's own
    bytes, no copy of them, and the events are upb's: each event's bytes are those upb read."""
    path = sample_capture("healthy_loop")
    raw, data, starts, ends = _layout_of(path)
    assert data is raw  # the file's bytes, not a copy: the last event has PAD bytes after it
    space = xplane.message_class("XSpace", events_as_bytes=True)()
    space.ParseFromString(raw)
    upb_events = [event for plane in space.planes for line in plane.lines for event in line.events]
    assert [data[a:b] for a, b in zip(starts, ends, strict=True)] == upb_events
    # A file that ends with its last event: its bytes with PAD zero bytes added.
    small = tmp_path / "small.xplane.pb"
    small.write_bytes(_space_of(_line_of(_EVENTS)))
    raw, data, starts, ends = _layout_of(small)
    assert (
        data == raw + bytes(PAD_BYTES)
        and [data[a:b] for a, b in zip(starts, ends, strict=True)] == _EVENTS
    )
    assert_same(small)


LAYOUTS = {
    "another field between events": _line_of(_EVENTS, between=field(11, b"shown")),
    "an events tag in two bytes": field(2, b"line")
    + b"\xa2\x00"
    + varint(len(_EVENTS[0]))
    + _EVENTS[0]
    + field(4, _EVENTS[1]),
    "a length varint longer than it needs": field(4, _EVENTS[0])
    + tag(4, 2)
    + bytes([len(_EVENTS[1]) | 0x80, 0])
    + _EVENTS[1],
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_events_not_in_one_run_are_laid_out_by_upb(tmp_path: Path, layout: str) -> None:
    """Where a line's events are not one run of one-byte tags and minimal lengths, the file's
    own bytes are not used (upb lays the events out), and the frame is still upb's."""
    path = tmp_path / "case.xplane.pb"
    path.write_bytes(_space_of(LAYOUTS[layout], tail=field(4, b"a host name long enough")))
    raw, data, starts, ends = _layout_of(path)
    # Not the file's bytes (in place, they would be: the last event has PAD bytes after it).
    assert data is not raw and data != raw + bytes(PAD_BYTES)
    assert [data[a:b] for a, b in zip(starts, ends, strict=True)] == _EVENTS
    assert_same(path)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_compiled_walk_reads_any_layout_in_place(tmp_path: Path, layout: str) -> None:
    """The compiled core walks every field of the file as upb does: events not in one run are
    still read where they lie, and they are the bytes upb read."""
    from xlaprof.parse.xplane import wire as xplane_wire

    if xplane_wire.native() is None:
        pytest.skip("the compiled decoder is not built")
    path = tmp_path / "case.xplane.pb"
    path.write_bytes(_space_of(LAYOUTS[layout], tail=field(4, b"a host name long enough")))
    raw, data, starts, ends = _layout_of(path, pure=False)
    assert data is raw
    assert [data[a:b] for a, b in zip(starts, ends, strict=True)] == _upb_events(raw) == _EVENTS
