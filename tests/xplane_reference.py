"""The reference xplane decoder: the event frame as upb's messages give it, field by field.

``reference_frame`` is the parser as it was before the numpy wire decoder (commit bd30631): upb
parses the file into full messages and a Python loop reads every event's fields, so a value it
gives comes from protobuf's decoder, not from the code under test. ``assert_same`` holds
``xspace_frame`` to it (tests/parse/xplane/test_wire.py; ``benchmarks/xplane_decode.py --check``
on a million events).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from xlaprof.errors import BadCapture
from xlaprof.parse import events as event_frame
from xlaprof.parse.xplane import schema as xplane
from xlaprof.parse.xplane import xspace_frame
from xlaprof.parse.xplane.args import ArgsDtype, stat_values

_MAX = 2**63 - 1


# -- the reference: today's decoding loop over upb messages --------------------------------------
def reference_frame(path: Path, host: str | None = None) -> pd.DataFrame:
    """The event frame as the per-event loop over upb's messages made it (plus ``group_id``,
    read from ``args`` as ``step_num`` is)."""
    space = xplane.read_xspace(path)
    if not space.planes:
        size = Path(path).stat().st_size
        what = "empty file" if size == 0 else f"{size} bytes with no profiler planes"
        raise BadCapture(f"{path}: {what}, not an xplane capture")
    planes = [p for p in space.planes if any(line.events for line in p.lines)]
    stamps = [line.timestamp_ns for p in planes for line in p.lines if line.events]
    base_ns = min(stamps, default=0)
    rows: list[tuple[str, str, str, int, int, dict[str, Any], dict[str, Any] | None]] = []
    for plane in planes:
        stat_names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        names, own, on_op_lines = {}, {}, {}
        for key, meta in plane.event_metadata.items():
            names[key] = meta.name
            stats = {
                stat_names.get(s.metadata_id, "?"): xplane.stat_value(s, stat_names)
                for s in meta.stats
            }
            promoted = {k: stats[k] for k in (*TEXT, *NUMBERS) if k in stats}
            own[key] = on_op_lines[key] = promoted
            if meta.display_name and "hlo_op" not in promoted:
                on_op_lines[key] = {**promoted, "hlo_op": meta.display_name}
        for line in plane.lines:
            line_name = line.display_name or line.name
            lookup = on_op_lines if line_name in xplane.OP_LINES else own
            base_ps = (line.timestamp_ns - base_ns) * 1000
            for event in line.events:
                args = None
                if event.stats:
                    args = {
                        stat_names.get(s.metadata_id, "?"): xplane.stat_value(s, stat_names)
                        for s in event.stats
                    }
                start, duration = base_ps + event.offset_ps, event.duration_ps
                meta_values = lookup.get(event.metadata_id, {})
                name = names.get(event.metadata_id, "")
                rows.append((plane.name, line_name, name, start, duration, meta_values, args))
    kept = [r for r in rows if -_MAX <= r[3] <= _MAX and r[4] >= 0 and r[3] + r[4] <= _MAX]
    start_ps = np.array([r[3] for r in kept], np.int64)
    duration_ps = np.array([r[4] for r in kept], np.int64)
    columns: dict[str, Any] = {
        "host": pd.Categorical([host or xplane.hostname(space, path)] * len(kept)),
        "plane": pd.Categorical([r[0] for r in kept]),
        "plane_kind": pd.Categorical([event_frame.plane_kind(r[0]) for r in kept]),
        "device": pd.Categorical([event_frame.device_name(r[0]) for r in kept]),
        "line": pd.Categorical([r[1] for r in kept]),
        "name": pd.Categorical([r[2] for r in kept]),
        "start_ns": base_ns + start_ps // 1000,
        "end_ns": base_ns + (start_ps + duration_ps) // 1000,
        "duration_ns": duration_ps / 1000.0,
    }

    def value(row: tuple, key: str) -> Any:
        args = row[6] or {}
        return args[key] if key in args else row[5].get(key)

    for key in TEXT:
        texts = [value(r, key) for r in kept]
        columns[key] = pd.Categorical(
            np.array([None if v is None else str(v) for v in texts], object)
        )
    args_of = [r[6] or {} for r in kept]
    columns["step_num"] = pd.array(
        [event_frame.step_number(a["step_num"]) if "step_num" in a else None for a in args_of],
        dtype="Int64",
    )
    for key in NUMBERS:
        columns[key] = np.array([event_frame.finite(value(r, key)) for r in kept], np.float64)
    columns["group_id"] = pd.array(
        [event_frame.step_number(a["group_id"]) if "group_id" in a else None for a in args_of],
        dtype="Int64",
    )
    columns["args"] = [r[6] for r in kept]
    frame = pd.DataFrame(columns).sort_values("start_ns", kind="stable", ignore_index=True)
    frame.attrs["dropped_events"] = len(rows) - len(kept)
    frame.attrs["profile_start_ns"] = xplane.profile_start_ns(space)
    epoch = xplane.epoch_offset_ns(space)
    if epoch is not None:
        frame.attrs["epoch_offset_ns"] = epoch
    frame.attrs["devices"] = [
        xplane.plane_info(p) for p in planes if event_frame.plane_kind(p.name) == "device"
    ]
    # The programs the metadata plane embeds: each event metadata's "Hlo Proto" bytes stats.
    protos = []
    for plane in space.planes:
        if plane.name == "/host:metadata":
            stat_names = {key: meta.name for key, meta in plane.stat_metadata.items()}
            for meta in plane.event_metadata.values():
                protos += [
                    (meta.name, bytes(stat.bytes_value))
                    for stat in meta.stats
                    if stat_names.get(stat.metadata_id) in ("Hlo Proto", "hlo_proto")
                    and stat.bytes_value
                ]
    frame.attrs["hlo_protos"] = protos
    return frame


TEXT = ("hlo_op", "hlo_module", "hlo_category", "program_id")


NUMBERS = ("flops", "bytes_accessed", "device_offset_ps", "device_duration_ps")


def _outcome(function: Any, path: Path, **kwargs: Any) -> pd.DataFrame | str:
    try:
        return function(path, **kwargs)
    except BadCapture as error:
        return f"BadCapture: {error}"


def assert_same(path: Path) -> pd.DataFrame | str:
    """``xspace_frame`` equals the reference on ``path``, with and without ``args``."""
    expected = _outcome(reference_frame, path)
    got = _outcome(xspace_frame, path)
    if isinstance(expected, str) or isinstance(got, str):
        assert got == expected
        assert _outcome(xspace_frame, path, args=False) == expected
        return expected
    assert_frames(got, expected)
    without = xspace_frame(path, args=False)
    assert without["args"].isna().all()
    if len(expected):  # an empty frame's args column is float64, as it always was
        expected["args"] = pd.Series([None] * len(expected), dtype=object)
    assert_frames(without, expected)
    return got


def assert_frames(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Equal frames; ``args`` dicts compared key by key, value types included (``==`` alone
    takes 1 for 1.0, and a NaN for unequal to itself). Each stat read alone (``stat_values``,
    as the analysis reads them) is first held to ``dict.get`` on the expected dicts."""
    dicts = [d if isinstance(d, dict) else None for d in expected["args"].tolist()]
    for key in sorted({key for d in dicts if d for key in d} | {"no such stat"}):
        alone = stat_values(got["args"], key).tolist()
        wanted = [d.get(key) if d else None for d in dicts]
        assert all(_same(a, b) for a, b in zip(alone, wanted, strict=True)), key
    for mine, theirs in zip(got["args"], expected["args"], strict=True):
        assert (mine is None) == (theirs is None)
        if theirs is not None:
            assert list(mine) == list(theirs)
            assert all(_same(mine[key], theirs[key]) for key in theirs), (mine, theirs)
    plain = {"args": pd.Series([None] * len(got), dtype=object)}
    pd.testing.assert_frame_equal(
        got.assign(**plain), expected.assign(**plain), check_exact=True, check_categorical=True
    )
    if isinstance(got["args"].dtype, ArgsDtype):  # decoded on demand: dicts, as an object column
        assert expected["args"].dtype == object
    else:
        assert got["args"].dtype == expected["args"].dtype
    assert got.attrs == expected.attrs
    for key in TEXT:
        assert list(got[key].cat.categories) == list(expected[key].cat.categories)


def _same(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and a != a:
        return b != b
    return a == b
