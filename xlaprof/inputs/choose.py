"""Which of the parts loaded from one input a command reads: runs told apart, the latest first.

A folder may hold several runs: ``xlaprof run --out DIR`` run twice writes a second set of
process folders beside the first. The process folders of one run are those of one launch
(``run.json``'s ``env`` holds ``XLAPROF_LAUNCH_ID``, ``rundir.schema.LAUNCH_ENV``); folders
written without one (``xlaprof.profile()`` in a script, an older xlaprof) are one run when
their processes overlapped in time, as ranks of one job do, and apart when one began after the
other ended. Runs are ordered by their recorded start time (``run.json``'s ``started``), never
by folder name or PID, and commands read the latest unless a process is named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xlaprof.errors import RunDirError
from xlaprof.model.request import ALL_PROCESSES
from xlaprof.parse.units import format_utc
from xlaprof.rundir.schema import LAUNCH_ENV

if TYPE_CHECKING:
    from xlaprof.model.parts import Part


@dataclass(frozen=True)
class Chosen:
    """The parts a command reads, every process name found, and the notes saying what was
    picked when there was a choice."""

    parts: list[Part]
    processes: list[str]
    notes: list[str]


def _started(part: Part) -> float:
    started = part.run.info.started if part.run is not None else None
    return float(started) if started is not None else float("-inf")


def _ended(part: Part) -> float:
    run = part.run
    if run is None:
        return float("inf")
    ended = run.info.ended
    return float(ended) if ended is not None else float("inf")  # still running: overlaps all


def runs_of(parts: list[Part]) -> list[list[Part]]:
    """The parts grouped into runs, earliest run first (each run's processes in input order).
    Parts that are not run directories (files, captures) are one group of their own."""
    others = [p for p in parts if p.run is None]
    launched: dict[str, list[Part]] = {}
    loose: list[Part] = []
    for part in parts:
        if part.run is None:
            continue
        launch = part.run.info.env.get(LAUNCH_ENV)
        if launch:
            launched.setdefault(launch, []).append(part)
        else:
            loose.append(part)
    groups = list(launched.values())
    # Without a launch id: processes that overlapped in time are one job's.
    current: list[Part] = []
    reach = float("-inf")
    for part in sorted(loose, key=_started):
        if current and _started(part) > reach:
            groups.append(current)
            current, reach = [], float("-inf")
        current.append(part)
        reach = max(reach, _ended(part))
    if current:
        groups.append(current)
    order = {id(p): i for i, p in enumerate(parts)}
    groups = [sorted(g, key=lambda p: order[id(p)]) for g in groups]
    groups.sort(key=lambda g: (min(_started(p) for p in g), order[id(g[0])]))
    return ([others] if others else []) + groups


def _when(part: Part) -> str:
    started = part.run.info.started if part.run is not None else None
    if started is None:
        return "start not recorded"
    return "started " + format_utc(started)


def _listed(names: list[str]) -> str:
    return ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")


def choose(parts: list[Part], process: str | None, where: str) -> Chosen:
    """The parts ``process`` names: ``ALL_PROCESSES`` every one, a folder name that process,
    None every process of the latest run. ``RunDirError`` when no process has that name."""
    names = [p.name for p in parts]
    if process == ALL_PROCESSES:
        return Chosen(parts, names, [])
    if process is not None:
        mine = [p for p in parts if p.name == process]
        if not mine:
            raise RunDirError(
                f"{where}: no process run named {process!r} (there are: {_listed(names)})"
            )
        return Chosen(mine, names, [])
    runs = runs_of(parts)
    if len(runs) <= 1:
        return Chosen(parts, names, [])
    latest = runs[-1]
    older = [p.name for run in runs[:-1] for p in run]
    note = (
        f"{where} holds {len(runs)} runs: reading the latest ({_when(latest[0])}: "
        f"{_listed([p.name for p in latest])}); earlier: {_listed(older)} "
        "(--process NAME for one of them, --process '*' for all)"
    )
    return Chosen(latest, names, [note])
