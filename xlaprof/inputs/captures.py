"""Capture files: finding them (sessions, hosts), reading one, naming hosts apart.

A capture is one ``.xplane.pb`` or Chrome trace (``*trace.json``, ``*trace.json.gz``) per host.
Captures are grouped into **sessions** (each ``plugins/profile/<time>/`` folder, or each folder
holding captures). Used by ``xlaprof.inputs.traces`` (one session in memory) and by the pod
workers (``xlaprof.inputs.pod``, one host each).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.errors import BadCapture, InputNotFound, InputNotRecognized, XlaprofError
from xlaprof.model.trace import DEVICE_COLUMNS
from xlaprof.parse.chrome_trace import chrome_trace_frame
from xlaprof.parse.events import host_from_filename
from xlaprof.parse.xplane import xspace_frame

if TYPE_CHECKING:
    import pandas as pd

XPLANE_SUFFIX = ".xplane.pb"
CHROME_SUFFIXES = ("trace.json", "trace.json.gz")


def is_capture_file(path: Path) -> bool:
    """A ``.xplane.pb`` or a Chrome trace (``*trace.json``, ``*trace.json.gz``) by its name."""
    name = path.name
    return name.endswith(XPLANE_SUFFIX) or name.endswith(CHROME_SUFFIXES)


def session_of(file: Path, root: Path) -> str:
    """A capture's session: its ``plugins/profile/<session>`` folder, else its folder."""
    parts = file.parent.parts
    for index in range(len(parts) - 2):
        if parts[index] == "plugins" and parts[index + 1] == "profile":
            return parts[index + 2]
    if root.is_file():
        return ""
    relative = file.parent.relative_to(root)
    return "" if str(relative) == "." else relative.as_posix()


def find_sessions(path: Path) -> dict[str, list[Path]]:
    """Every session at or below ``path`` and its capture files (xplanes preferred).

    torch_xla writes ``host.xplane.pb`` and ``host.trace.json.gz`` side by side: where a
    session has xplanes, its Chrome traces are the same events and are left out.
    """
    path = Path(path)
    if not path.exists():
        raise InputNotFound(f"{path}: no such file or directory")
    if path.is_file():
        if not is_capture_file(path):
            raise InputNotRecognized(
                f"{path}: not a trace file (*.xplane.pb, *trace.json, *trace.json.gz)"
            )
        return {session_of(path, path): [path]}
    sessions: dict[str, list[Path]] = {}
    for file in sorted(p for p in path.rglob("*") if p.is_file() and is_capture_file(p)):
        sessions.setdefault(session_of(file, path), []).append(file)
    for name, files in sessions.items():
        xplanes = [f for f in files if f.name.endswith(XPLANE_SUFFIX)]
        sessions[name] = xplanes or files
    if not sessions:
        raise InputNotRecognized(
            f"{path}: no trace here (*.xplane.pb or *trace.json.gz, e.g. under "
            "plugins/profile/); capture one with `xlaprof run --trace-steps A:B` or "
            "`xlaprof capture`"
        )
    return dict(sorted(sessions.items()))


def trace_files(path: Path, session: str | None = None) -> list[Path]:
    """The capture files of one session at ``path`` (the latest unless ``session`` is given)."""
    return pick_session(find_sessions(Path(path)), Path(path), session)[1]


def pick_session(
    sessions: dict[str, list[Path]], root: Path, session: str | None
) -> tuple[str, list[Path]]:
    if session is None:
        name = list(sessions)[-1]
        return name, sessions[name]
    if session in sessions:
        return session, sessions[session]
    found = ", ".join(name or "." for name in sessions)
    raise InputNotRecognized(f"{root}: no session {session!r} here (sessions: {found})")


def load_capture_file(
    path: Path,
    args: bool | frozenset[str] = True,
    limit: int | None = None,
    data: bytes | None = None,
    read_only: bool = False,
) -> pd.DataFrame:
    """One capture file's events (``limit``: ``--max-size``, else each reader's own cap);
    ``args=False`` keeps no ``args`` of an xplane (its stats, which the column decodes on
    demand: a pod worker's cache has no ``args`` column), keeping what the device model reads
    of them as a column (``framework_op``); a set of stat names keeps those stats alone
    (``xspace_frame``; a Chrome trace's ``args`` are kept whole). ``data``: an xplane's
    bytes, read by the caller; ``read_only``: for a caller that writes into none of the
    columns (``xspace_frame``)."""
    if path.name.endswith(XPLANE_SUFFIX):
        without = args is False
        frame = xspace_frame(
            path, args=args, framework_op=without, limit=limit, data=data, read_only=read_only
        )
    else:
        frame = chrome_trace_frame(path, limit=limit)
    frame.attrs["source"] = str(path)
    return frame


def insert_session(events: pd.DataFrame, session: str) -> None:
    """Put a first column ``session`` naming ``session`` on every row of ``events``: one code
    throughout, zeros from calloc (pages untouched until read), and not copied into the
    Series (pandas copies an array given with an index unless told not to: a byte an event,
    44 MB of a 1 GB host's frame)."""
    import numpy as np
    import pandas as pd

    codes = np.zeros(len(events), np.int8)
    dtype = pd.CategoricalDtype(pd.Index([session]))
    column = pd.Categorical.from_codes(codes, dtype=dtype, validate=False)
    events.insert(0, "session", pd.Series(column, events.index, copy=False))


def load_safely(
    path: Path,
    limit: int | None = None,
    args: bool | frozenset[str] = True,
    read_only: bool = False,
) -> pd.DataFrame | XlaprofError:
    """``load_capture_file``, with what is wrong with the file returned, not raised: one host's
    problem is a warning when other hosts load."""
    try:
        return load_capture_file(path, args=args, limit=limit, read_only=read_only)
    except XlaprofError as error:
        return error
    except (RecursionError, MemoryError) as error:
        return BadCapture(f"{path}: {type(error).__name__} while reading it (skipped)")


def hosts_named_apart(hosts: list[tuple[str, str | None]]) -> list[str]:
    """One distinct name per capture, given each capture's (host, file) in file order.

    Hosts are named by ``XSpace.hostnames``; where two files name the same host (two processes
    of one machine, or copies), those files are named by their file names instead, and a name
    still taken gets ``#2`` (then ``+``) appended.
    """
    counts: dict[str, int] = {}
    for host, _ in hosts:
        counts[host] = counts.get(host, 0) + 1
    taken: set[str] = set()
    names = []
    for host, source in hosts:
        name = host
        if counts[host] > 1 and source:
            name = host_from_filename(Path(source))
        while name in taken:
            name = f"{name}#2" if "#" not in name else f"{name}+"
        taken.add(name)
        names.append(name)
    return names


def name_hosts_apart(frames: list[pd.DataFrame]) -> None:
    """Rename the ``host`` column of frames whose host another frame has too (in place)."""
    import numpy as np
    import pandas as pd

    loaded = [frame for frame in frames if len(frame)]
    hosts = [(str(frame["host"].iloc[0]), frame.attrs.get("source")) for frame in loaded]
    for frame, (host, _), name in zip(loaded, hosts, hosts_named_apart(hosts), strict=True):
        if name != host:
            frame["host"] = pd.Categorical.from_codes(
                np.zeros(len(frame), np.int8), pd.Index([name])
            )


def device_table(frames: list[pd.DataFrame], session: str) -> pd.DataFrame:
    """One row per device plane of ``frames`` (DEVICE_COLUMNS), from the planes' own stats."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for frame in frames:
        if not len(frame):
            continue
        host = str(frame["host"].iloc[0])
        infos = frame.attrs.get("devices") or []
        rows += [{"session": session, "host": host, **info} for info in infos]
    table = pd.DataFrame(rows, columns=DEVICE_COLUMNS)
    return table


def embedded_protos(frames: list[pd.DataFrame]) -> list[tuple[str, list[Any]]]:
    """Per loaded frame, its host and the HLO protos its xplane embeds (``attrs["hlo_protos"]``,
    read with its events; none for other formats): what ``hlo_sources`` reads, taken before
    the frames are joined and their attrs dropped."""
    return [
        (str(frame["host"].iloc[0]), frame.attrs.get("hlo_protos") or [])
        for frame in frames
        if len(frame)
    ]


def hlo_sources(
    protos: list[tuple[str, list[Any]]], graphs: list[Any] | None = None
) -> pd.DataFrame:
    """Where each compiled instruction came from, per host (``parse.hlo_sources.SOURCE_COLUMNS``
    and ``host``): the HLO protos each xplane embeds (``protos``: ``embedded_protos``) and, for a
    run directory, its harvested graphs (``graphs``: ``rundir.schema.GraphInfo``; their text
    carries the innermost frame only, so they fill in instructions the protos do not name). A
    proto that does not parse adds nothing, and device time per line is then shown as not
    attributed.
    """
    import pandas as pd

    from xlaprof.parse.frames import is_library_file
    from xlaprof.parse.hlo_sources import SOURCE_COLUMNS, instruction_sources

    rows: list[dict[str, Any]] = []
    hosts = []
    for host, embedded in protos:
        hosts.append(host)
        found = instruction_sources(embedded)
        rows += [{"host": host, **row.__dict__} for row in found]
    named = {(r["host"], r["module"], r["instruction"]) for r in rows}
    for graph in graphs or []:
        if graph.hlo is None:
            continue
        for inst in graph.hlo.instructions:
            user = (
                inst.source_file
                if inst.source_file and not is_library_file(inst.source_file)
                else None
            )
            for host in hosts:
                if (host, graph.module, inst.name) in named:
                    continue
                rows.append(
                    {
                        "host": host,
                        "module": graph.module,
                        "program_id": None,
                        "instruction": inst.name,
                        "opcode": inst.opcode,
                        "op_type": inst.op_type,
                        "op_name": inst.op_name,
                        "source_file": inst.source_file,
                        "source_line": inst.source_line,
                        "user_file": user,
                        "user_line": inst.source_line if user else None,
                        "user_function": None,
                    }
                )
    return pd.DataFrame(rows, columns=["host", *SOURCE_COLUMNS])
