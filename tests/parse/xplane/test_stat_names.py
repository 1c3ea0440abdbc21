"""An event's stats as the frame's ``args`` give them, whatever the count of stat names: the
frame keeps a stat's name codes as int16 where a capture's names fit (tens, as real captures
have) and as int32 past that, and either way each event reads what was written into it."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlaprof.parse.xplane import xspace_frame
from xlaprof.parse.xplane.schema import xspace_class


def _capture(path: Path, names: int) -> dict[int, dict[str, object]]:
    """A host plane of ``names`` stat names and one event per chosen name (the lowest, the
    highest, those by 2**15), each with its own int stat and a ref stat naming another; what
    each event's args must be, by event offset."""
    space = xspace_class()()
    space.hostnames.append("host-0")
    plane = space.planes.add(id=1, name="/host:CPU")
    plane.event_metadata[1].id, plane.event_metadata[1].name = 1, "work"
    for key in range(1, names + 1):
        plane.stat_metadata[key].id, plane.stat_metadata[key].name = key, f"s{key}"
    line = plane.lines.add(id=1, name="python", timestamp_ns=1_000)
    expected: dict[int, dict[str, object]] = {}
    chosen = sorted({1, 2, names // 2, min(names, 2**15 - 1), min(names, 2**15 + 2), names})
    for at, key in enumerate(chosen):
        event = line.events.add(metadata_id=1, offset_ps=at * 10**6, duration_ps=10**5)
        other = names + 1 - key  # (names is even: never key itself)
        event.stats.add(metadata_id=key, int64_value=at + 7)
        event.stats.add(metadata_id=other, ref_value=key)  # names stat ``key``
        expected[at * 10**6] = {f"s{key}": at + 7, f"s{other}": f"s{key}"}
    path.write_bytes(space.SerializeToString())
    return expected


@pytest.mark.parametrize("names", [40, 40_000])  # even counts
def test_each_event_reads_its_own_stats_whatever_the_count_of_names(
    tmp_path: Path, names: int
) -> None:
    expected = _capture(tmp_path / "c.xplane.pb", names)
    frame = xspace_frame(tmp_path / "c.xplane.pb")
    work = frame[frame["name"].astype(str) == "work"].sort_values("start_ns")
    offsets = (work["start_ns"] - work["start_ns"].min()).tolist()
    found = dict(zip(offsets, work["args"], strict=True))
    assert {offset // 1000: value for offset, value in expected.items()} == found
