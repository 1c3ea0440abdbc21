"""Independent decodes of the test inputs: what the expected values come from.

None of this calls xlaprof: a minimal protobuf wire decode of an XSpace (no ``xplane_pb2``
ships with XProf or torch_xla), ``gzip`` + ``json`` for Kineto traces, the event count each
capture in ``../shared/traces`` records in its ``.source.txt``, XProf's DataTable JSON as rows,
and interval unions in plain Python.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import shared_trace

TOLERANCE = 0.01  # the bar for agreeing with XProf: within 1%


def raw_event_count(name: str) -> int:
    """The event count of the independent decode recorded beside a ``../shared/traces`` capture."""
    text = shared_trace(f"{name}.source.txt").read_text()
    match = re.search(r"events \(independent decode\): (\d+)", text) or re.search(
        r"ph=X events: (\d+)", text
    )
    assert match, f"no event count in {name}.source.txt"
    return int(match.group(1))


def rows(table: dict[str, Any], strict: bool = True) -> list[dict[str, Any]]:
    """A DataTable-style JSON table (cols/rows) as a list of dicts (``strict``: every row has a
    cell per column)."""
    columns = [c["id"] for c in table["cols"]]
    return [
        dict(zip(columns, [cell.get("v") for cell in row["c"]], strict=strict))
        for row in table["rows"]
    ]


def xprof_tool(path: Path, tool: str, tmp: Path) -> Any:
    """XProf's converter ``tool`` on a copy of ``path`` in ``tmp`` (it writes beside it)."""
    import shutil

    from xprof.convert.raw_to_tool_data import xspace_to_tool_data

    copy = tmp / path.name
    if not copy.exists():
        shutil.copy(path, copy)
    data, _ = xspace_to_tool_data([str(copy)], tool, {"use_saved_result": False})
    return json.loads(data)


def close(mine: float, theirs: float, tolerance: float = TOLERANCE) -> bool:
    return abs(mine - theirs) <= tolerance * abs(theirs)


def union_ns(spans: list[tuple[float, float]]) -> float:
    """Length of the union of ``spans``."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        start = max(start, reach)
        if end > start:
            total += end - start
            reach = end
    return total


def clipped_union_ns(spans: list[tuple[int, int]], start: int, end: int) -> int:
    """Length of the union of ``spans`` clipped to [start, end)."""
    total, reach = 0, start
    for a, b in sorted(spans):
        a, b = max(a, reach), min(b, end)
        if b > a:
            total += b - a
            reach = b
    return total


# ---------------------------------------------------------------- protobuf wire format


def _varint(data: memoryview, index: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[index]
        index += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, index
        shift += 7


def _fields(data: memoryview) -> Iterator[tuple[int, Any]]:
    """(field number, value) of one protobuf message: ints for varints, bytes views else."""
    index = 0
    while index < len(data):
        key, index = _varint(data, index)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, index = _varint(data, index)
        elif wire == 2:
            length, index = _varint(data, index)
            value, index = data[index : index + length], index + length
        elif wire == 1:
            value, index = data[index : index + 8], index + 8
        elif wire == 5:
            value, index = data[index : index + 4], index + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield number, value


@dataclass
class Event:
    plane: str
    line: str
    name: str
    start_ns: float
    end_ns: float
    # the names of the stats the event itself carries (XEvent.stats: hlo_op, program_id, ...)
    stats: frozenset[str] = frozenset()


@dataclass
class Decoded:
    events: list[Event] = field(default_factory=list)

    def named(self, name: str) -> list[Event]:
        return [e for e in self.events if e.name == name]

    def on(self, prefix: str) -> list[Event]:
        return [e for e in self.events if e.plane.startswith(prefix)]


def decode_xspace(path: Path) -> Decoded:
    """XSpace.planes(1) -> XPlane{name 2, lines 3, event_metadata 4, stat_metadata 5};
    XLine{name 2, timestamp_ns 3, events 4}; XEvent{metadata_id 1, offset_ps 2, duration_ps 3,
    stats 4: XStat{metadata_id 1}}; each metadata map entry is {key 1, value 2: {id 1,
    name 2}}."""
    decoded = Decoded()
    for number, plane_bytes in _fields(memoryview(path.read_bytes())):
        if number != 1:
            continue
        name, lines, names, stat_names = "", [], {}, {}
        for key, value in _fields(plane_bytes):
            if key == 2:
                name = bytes(value).decode()
            elif key == 3:
                lines.append(value)
            elif key in (4, 5):
                entry = dict(_fields(value))
                meta = dict(_fields(entry[2]))
                (names if key == 4 else stat_names)[entry[1]] = bytes(meta.get(2, b"")).decode()
        for line_bytes in lines:
            line: dict[str, Any] = {"name": "", "ts": 0, "events": []}
            for key, value in _fields(line_bytes):
                if key == 2:
                    line["name"] = bytes(value).decode()
                elif key == 3:
                    line["ts"] = value
                elif key == 4:
                    fields = list(_fields(value))
                    event = {k: v for k, v in fields if k != 4}
                    event["stats"] = frozenset(
                        stat_names.get(dict(_fields(v)).get(1, 0), "") for k, v in fields if k == 4
                    )
                    line["events"].append(event)
            for event in line["events"]:
                start = line["ts"] + event.get(2, 0) / 1000
                decoded.events.append(
                    Event(
                        name,
                        line["name"],
                        names.get(event.get(1, 0), ""),
                        start,
                        start + event.get(3, 0) / 1000,
                        event["stats"],
                    )
                )
    return decoded


def decode_kineto(path: Path) -> list[dict[str, Any]]:
    """The ``traceEvents`` of a (gzipped) Chrome trace."""
    with gzip.open(path, "rt") as handle:
        return json.load(handle)["traceEvents"]


# ---------------------------------------------------------------- the H100 captures' steps


def train_windows(xspace: Decoded) -> dict[int, tuple[float, float]]:
    """The script's ``StepTraceAnnotation("train", step_num=i)`` ranges, in order (0..11)."""
    trains = sorted(xspace.named("train"), key=lambda e: e.start_ns)
    return {i: (e.start_ns, e.end_ns) for i, e in enumerate(trains)}


def gpu_in(xspace: Decoded, window: tuple[float, float], name: str | None = None) -> list[Event]:
    """The GPU events that start in ``window`` (of one ``name``, if given)."""
    return [
        e
        for e in xspace.on("/device:GPU")
        if window[0] <= e.start_ns < window[1] and (name is None or e.name == name)
    ]


def profiler_steps(kineto: list[dict[str, Any]], cat: str) -> dict[int, tuple[float, float]]:
    """``ProfilerStep#N`` ranges of one category, by N, in trace microseconds."""
    return {
        int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"])
        for e in kineto
        if e.get("ph") == "X" and e.get("cat") == cat and e["name"].startswith("ProfilerStep#")
    }


def run_steps(run_dir: Path) -> dict[int, dict[str, float]]:
    """Each step of a run directory as the device ran it, from its files alone (``steps.jsonl``
    and ``executions.jsonl`` read as JSON; no xlaprof): per step its host start and end (Unix
    s), ``device_s`` (its executions' own busy time: completion less the later of launch and
    the previous completion), ``end`` (the later of its host end and its last completion),
    ``time_s`` (end less the later of the previous step's end and its own start), and the
    executions it launched. An execution is the step's whose window (its start to the next
    step's) holds its launch, or the previous step's if that step built a graph (``graphs``)
    not yet seen launched (its sync's launch, a moment after the sync returned)."""
    (directory,) = [p.parent for p in run_dir.glob("*/steps.jsonl")] or [run_dir]
    rows = [json.loads(line) for line in (directory / "steps.jsonl").read_text().splitlines()]
    runs = [json.loads(line) for line in (directory / "executions.jsonl").read_text().splitlines()]
    runs = sorted((r["launch"], r["completion"]) for r in runs if "launch" in r)
    starts = [row["start"] for row in rows]
    left = [row.get("graphs") or 0 for row in rows]
    mine: dict[int, list[tuple[float, float]]] = {i: [] for i in range(len(rows))}
    for launch, completion in runs:
        index = max((i for i, s in enumerate(starts) if s <= launch), default=None)
        if index is None:
            continue
        if index > 0 and left[index - 1] > 0:
            index -= 1
        if (
            index == len(rows) - 1
            and left[index] == 0
            and launch > starts[index] + rows[index]["wall_s"]
        ):
            continue
        left[index] -= 1
        mine[index].append((launch, completion))
    busy: dict[tuple[float, float], float] = {}
    previous = float("-inf")
    for launch, completion in sorted(runs, key=lambda r: r[1]):
        busy[(launch, completion)] = completion - max(launch, previous)
        previous = max(previous, completion)
    out: dict[int, dict[str, float]] = {}
    ended = starts[0]
    for index, row in enumerate(rows):
        host_end = row["start"] + row["wall_s"]
        end = max([host_end] + [c for _, c in mine[index]])
        begin = max(ended, row["start"])
        out[row["step"]] = {
            "start": row["start"],
            "host_end": host_end,
            "begin": begin,
            "end": end,
            "time_s": end - begin,
            "device_s": sum(busy[r] for r in mine[index]),
            "executions": len(mine[index]),
        }
        ended = max(ended, end)
    return out
