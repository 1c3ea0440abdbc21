"""The folders an MCP client may make the server read, and what lies in them.

An agent names paths; the person who started ``xlaprof mcp --root DIR`` decided which folders
those may be in. So every path a tool takes is resolved (links followed, ``..`` removed) and
refused unless it lies inside one of the roots (``OutsideRoots``, exit code 24 at the CLI). A
folder is read only when none of the links inside it leads out of the roots: a capture folder
holding ``host.xplane.pb -> /home/me/other/secret.xplane.pb`` would otherwise be read through
the link. Inside a run directory the reader's own sandbox applies as well
(``xlaprof.safeio.resolve_inside``), and source lines are quoted only from files under the roots
(``source_root_for``).

``inventory`` lists what an agent can analyze under the roots: run directories, captures and
capture logdirs, and text files that hold a metrics report or PT_XLA_DEBUG output, with sizes.
It walks without following links, skips hidden folders, and stops at ``MAX_LISTED_ENTRIES``
files and folders. A listing reads a few files itself (a run's ``run.json``, a log's first and
last bytes): each is opened as every file someone sent is (``xlaprof.safeio``): a regular file,
never through a link (``O_NOFOLLOW``, on top of the ``lstat`` that chose it), capped. A run
whose ``run.json`` is a link is listed by name only, ``unreadable``: a link is never followed
to say what is behind it.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from xlaprof.errors import InputNotFound, InputTooLarge, InputUnreadable, OutsideRoots
from xlaprof.rundir.schema import RUN_JSON
from xlaprof.safeio import UnsafeFile, open_regular

# Files and folders one input may hold for its links to be checked: a pod logdir of 128 hosts
# has a few hundred; a folder past this is refused (name a folder inside it).
MAX_CHECKED_ENTRIES = 200_000
# Files and folders one listing visits before it stops (and says it stopped).
MAX_LISTED_ENTRIES = 50_000
# How deep a listing looks below a root.
MAX_LISTED_DEPTH = 8
# Text files sniffed for a metrics report or debug output: their first and last bytes.
SNIFF_BYTES = 64 * 1024
TEXT_SUFFIXES = (".log", ".txt", ".out", ".err")
# What marks each kind of text input (the parsers' own anchors: metrics_report, debug_log).
TEXT_MARKERS = {
    "metrics_report": (b"Metric: ", b"Counter: "),
    "debug_log": (b"Compilation Analysis", b"Execution Analysis", b"pt-xla-profiler"),
}
SKIPPED_FOLDERS = ("__pycache__", "node_modules", "site-packages")


@dataclass(frozen=True)
class Fingerprint:
    """What an input looked like when checked: files, bytes and the latest change. An analysis
    is reused only while these stay the same."""

    files: int
    size_bytes: int
    modified_ns: int


@dataclass
class Entry:
    """One thing an agent can analyze: ``kind`` is ``run`` (a run directory, or a folder of
    process runs), ``capture`` (a trace file), ``capture_logdir`` (a folder with
    ``plugins/profile/<session>/``), ``log`` (a text file holding a metrics report or
    PT_XLA_DEBUG output: ``contents`` says which) or ``saved_result`` (a ``--json`` document)."""

    path: str
    kind: str
    size_bytes: int
    files: int
    modified: str
    processes: list[str] | None = None
    status: str | None = None
    steps: int | None = None
    contents: list[str] | None = None


@dataclass
class Inventory:
    entries: list[Entry] = field(default_factory=list)
    truncated: bool = False


class Roots:
    """The folders the server may read, resolved once at start."""

    def __init__(self, folders: Iterable[str | os.PathLike[str]]) -> None:
        resolved: list[Path] = []
        for folder in folders:
            path = Path(folder).expanduser()
            try:
                real = path.resolve(strict=True)
            except FileNotFoundError:
                raise InputNotFound(f"{folder}: no such folder (--root)") from None
            except (OSError, RuntimeError) as error:
                raise InputUnreadable(f"{folder}: cannot be read ({error})") from None
            if not real.is_dir():
                raise InputUnreadable(f"{folder}: not a folder (--root takes folders)")
            resolved.append(real)
        if not resolved:
            raise InputNotFound("no folder to serve: give at least one --root DIR")
        self.paths: tuple[Path, ...] = tuple(dict.fromkeys(resolved))

    def __str__(self) -> str:
        return ", ".join(map(str, self.paths))

    def holding(self, path: Path) -> Path | None:
        """The root that holds resolved ``path`` (the innermost when roots nest), else None."""
        holders = [r for r in self.paths if path == r or r in path.parents]
        return max(holders, key=lambda r: len(r.parts)) if holders else None

    def resolve(self, name: str) -> Path:
        """``name`` resolved to an existing path inside the roots, with no link in it leading
        out; ``OutsideRoots``, ``InputNotFound`` or ``InputTooLarge`` otherwise.

        A relative name is taken relative to each root in turn (the first where it exists).
        """
        return self.resolve_input(name)[0]

    def resolve_input(self, name: str) -> tuple[Path, Fingerprint]:
        """``resolve(name)`` and the fingerprint of what is there (one walk for both)."""
        if not isinstance(name, str) or not name.strip() or "\x00" in name:
            raise InputNotFound(f"{name!r}: not a path")
        given = Path(name).expanduser()
        candidates = [given] if given.is_absolute() else [root / given for root in self.paths]
        chosen = next((c for c in candidates if os.path.lexists(c)), candidates[0])
        try:
            real = chosen.resolve()
        except (OSError, RuntimeError) as error:
            raise InputUnreadable(f"{name}: cannot be resolved ({error})") from None
        if self.holding(real) is None:
            raise OutsideRoots(
                f"{name}: outside the folders this server may read ({self}); start "
                "`xlaprof mcp` with --root DIR to allow another"
            )
        if not real.exists():
            raise InputNotFound(f"{name}: no such file or directory")
        return real, self.fingerprint(real)  # refuses a folder holding a link out of the roots

    def fingerprint(self, path: Path) -> Fingerprint:
        """Files, bytes and latest change under ``path``, checking that every link in it stays
        inside the roots (a link's target counts where it resolves, not where it points)."""
        files = size = latest = 0
        for entry, info in _walk(path, MAX_CHECKED_ENTRIES):
            if entry is None:
                raise InputTooLarge(
                    f"{path}: more than {MAX_CHECKED_ENTRIES} files and folders; name a folder "
                    "inside it"
                )
            if stat.S_ISLNK(info.st_mode):
                try:
                    target = entry.resolve()
                except (OSError, RuntimeError):
                    target = None
                if target is None or self.holding(target) is None:
                    raise OutsideRoots(
                        f"{path}: holds a link that leads out of the folders this server may "
                        f"read: {entry} -> {os.readlink(entry)}"
                    )
                continue
            if stat.S_ISREG(info.st_mode):
                files += 1
                size += info.st_size
            latest = max(latest, info.st_mtime_ns)
        return Fingerprint(files, size, latest)

    def inventory(self, under: Path | None = None) -> Inventory:
        """Run directories, captures, capture logdirs and logs under ``under`` (a resolved
        path inside the roots) or under every root, sorted by path."""
        found = Inventory()
        budget = [MAX_LISTED_ENTRIES]
        for top in [under] if under is not None else list(self.paths):
            if top.is_file():
                entry = _file_entry(top)
                if entry is not None:
                    found.entries.append(entry)
                continue
            _list_folder(top, 0, found, budget)
        found.entries.sort(key=lambda e: e.path)
        return found


def source_root_for(roots: Roots, input_path: Path, recorded: Path | None) -> Path:
    """The folder whose ``*.py`` files findings on ``input_path`` may quote: the run's recorded
    working directory when it lies inside the roots (``recorded``, already judged a real project
    folder by ``xlaprof.inputs.sourcefiles.recorded_root``), else the root holding the input.
    Either way nothing outside the roots is read."""
    if recorded is not None and roots.holding(recorded) is not None:
        return recorded
    holder = roots.holding(input_path)
    assert holder is not None, "inputs are resolved inside the roots first"
    return holder


def _walk(path: Path, limit: int) -> Iterator[tuple[Path | None, os.stat_result]]:
    """``path`` and everything below it with its ``lstat``, links not followed; a ``None``
    entry when more than ``limit`` were seen."""
    stack = [path]
    seen = 0
    while stack:
        current = stack.pop()
        try:
            info = current.lstat()
        except OSError:
            continue
        seen += 1
        if seen > limit:
            yield None, info
            return
        yield current, info
        if stat.S_ISDIR(info.st_mode):
            try:
                with os.scandir(current) as listing:
                    stack.extend(Path(e.path) for e in listing)
            except OSError:
                continue


def _list_folder(folder: Path, depth: int, found: Inventory, budget: list[int]) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        found.truncated = True
        return
    whole = _folder_entry(folder)
    if whole is not None:
        found.entries.append(whole)
        return
    try:
        with os.scandir(folder) as listing:
            children = sorted(listing, key=lambda e: e.name)
    except OSError:
        return
    runs = [
        Path(c.path)
        for c in children
        if c.is_dir(follow_symlinks=False) and _lexists(Path(c.path) / RUN_JSON)
    ]
    if runs:
        found.entries.append(_run_entry(folder, runs))
    _list_children(children, runs, depth, found, budget)


def _folder_entry(folder: Path) -> Entry | None:
    """A folder listed as one entry: a run directory, or a logdir of captures (each told by
    what is there, links not followed)."""
    if _is(folder / RUN_JSON, stat.S_ISREG):
        return _run_entry(folder, [folder])
    if _is(folder / "plugins", stat.S_ISDIR) and _is(folder / "plugins" / "profile", stat.S_ISDIR):
        return _logdir_entry(folder)
    return None


def _is(path: Path, kind: Callable[[int], bool]) -> bool:
    """Whether ``path`` itself (not what a link there points to) is of ``kind``."""
    try:
        return kind(path.lstat().st_mode)
    except OSError:
        return False


def _lexists(path: Path) -> bool:
    return os.path.lexists(path)


def _list_children(
    children: list[os.DirEntry[str]],
    runs: list[Path],
    depth: int,
    found: Inventory,
    budget: list[int],
) -> None:
    """A folder's children: its folders listed in turn (not its runs, hidden or skipped ones,
    nor past ``MAX_LISTED_DEPTH``), its files as entries, each taken from ``budget``."""
    for child in children:
        if child.name.startswith(".") or child.is_symlink():
            continue
        path = Path(child.path)
        if child.is_dir(follow_symlinks=False):
            if path in runs or child.name in SKIPPED_FOLDERS or depth >= MAX_LISTED_DEPTH:
                continue
            _list_folder(path, depth + 1, found, budget)
        elif child.is_file(follow_symlinks=False):
            budget[0] -= 1
            if budget[0] < 0:
                found.truncated = True
                return
            entry = _file_entry(path)
            if entry is not None:
                found.entries.append(entry)


def _totals(path: Path) -> tuple[int, int, int]:
    files = size = latest = 0
    for entry, info in _walk(path, MAX_LISTED_ENTRIES):
        if entry is None:
            break
        if stat.S_ISREG(info.st_mode):
            files += 1
            size += info.st_size
            latest = max(latest, info.st_mtime_ns)
    return files, size, latest


def _stamp(ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ns / 1e9)) if ns else ""


def _run_entry(folder: Path, runs: list[Path]) -> Entry:
    from xlaprof.errors import RunDirError
    from xlaprof.pipeline import run_record

    files, size, latest = _totals(folder)
    statuses: list[str] = []
    steps: int | None = None
    for run in runs:
        try:
            status, recorded = run_record(run)  # a run.json that is a link: unreadable
        except RunDirError:
            statuses.append("unreadable")
            continue
        statuses.append(status)
        if recorded is not None:
            steps = (steps or 0) + recorded
    status = statuses[0] if len(set(statuses)) == 1 else ", ".join(dict.fromkeys(statuses))
    return Entry(
        path=str(folder),
        kind="run",
        size_bytes=size,
        files=files,
        modified=_stamp(latest),
        processes=[r.name for r in runs],
        status=status or None,
        steps=steps,
    )


def _logdir_entry(folder: Path) -> Entry:
    files, size, latest = _totals(folder)
    return Entry(str(folder), "capture_logdir", size, files, _stamp(latest))


def _file_entry(path: Path) -> Entry | None:
    try:
        info = path.lstat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    from xlaprof.pipeline import is_capture, is_saved_result

    kind = "capture" if is_capture(path) else "saved_result" if is_saved_result(path) else None
    if kind is not None:
        return Entry(str(path), kind, info.st_size, 1, _stamp(info.st_mtime_ns))
    contents = _text_contents(path, info.st_size) if path.suffix in TEXT_SUFFIXES else []
    if not contents:
        return None
    return Entry(str(path), "log", info.st_size, 1, _stamp(info.st_mtime_ns), contents=contents)


def _text_contents(path: Path, size: int) -> list[str]:
    """Which text inputs ``path`` looks like, from its first and last ``SNIFF_BYTES``."""
    try:
        fd = open_regular(path, follow=False)
    except (OSError, UnsafeFile):
        return []
    with os.fdopen(fd, "rb") as handle:
        block = handle.read(SNIFF_BYTES)
        if size > 2 * SNIFF_BYTES:
            handle.seek(size - SNIFF_BYTES)
            block += handle.read(SNIFF_BYTES)
        elif size > SNIFF_BYTES:
            block += handle.read(SNIFF_BYTES)
    return [kind for kind, marks in TEXT_MARKERS.items() if any(m in block for m in marks)]
