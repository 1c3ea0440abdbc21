"""TORCH_TRACE logs as an analysis input: a log file (``.log``, ``.log.gz``) or the folder
``TORCH_TRACE`` pointed at (one log per process; ``rank_N`` in the name for each rank).

A file is taken as a TORCH_TRACE log when its first line is one of its records (a glog
prefix, then a JSON object), whatever its name; a folder when it holds such files (its own
files only, not sub-folders: a run directory keeps its log in ``torch_trace/``, read by the
run's loader). The first rank's compiles become the part's dynamo records, so the same
analyzers read them as the records ``xlaprof run`` keeps of a live ``torch.compile``; every
rank's log is kept (``AnalysisInput.torch_traces``) for what compares ranks.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from xlaprof.errors import InputNotRecognized
from xlaprof.model.input import AnalysisInput
from xlaprof.model.parts import SourceInfo
from xlaprof.parse.metrics_report import ParseWarning
from xlaprof.parse.torch_trace import (
    TorchTraceLog,
    dynamo_records,
    looks_like_torch_trace,
    read_torch_trace,
)
from xlaprof.safeio import UnsafeFile, open_regular

_SNIFF_BYTES = 4096
# A folder's files looked at to find logs (a TORCH_TRACE folder holds one per process).
MAX_FOLDER_FILES = 4096


def is_torch_trace_file(path: Path) -> bool:
    """Whether ``path`` is a regular file whose first line is a TORCH_TRACE record."""
    try:
        if not path.is_file():
            return False
        with os.fdopen(open_regular(path), "rb") as handle:
            if path.name.endswith(".gz"):
                with gzip.GzipFile(fileobj=handle) as inflated:
                    head = inflated.read(_SNIFF_BYTES)
            else:
                head = handle.read(_SNIFF_BYTES)
    except (OSError, UnsafeFile, EOFError, ValueError):
        return False
    return looks_like_torch_trace(head)


def torch_trace_files(path: Path) -> list[Path]:
    """The TORCH_TRACE logs ``path`` is or holds (its own files), sorted by name."""
    if path.is_file():
        return [path] if is_torch_trace_file(path) else []
    if not path.is_dir():
        return []
    found = []
    for index, child in enumerate(sorted(path.iterdir())):
        if index >= MAX_FOLDER_FILES:
            break
        if is_torch_trace_file(child):
            found.append(child)
    return found


def is_torch_trace_input(path: Path) -> bool:
    return bool(torch_trace_files(path))


def add_torch_traces(data: AnalysisInput, paths: list[Path], max_bytes: int) -> list[SourceInfo]:
    """Read the logs at ``paths`` into ``data`` (see the module docstring); their sources."""
    logs: list[TorchTraceLog] = []
    sources = []
    for path in paths:
        files = torch_trace_files(path)
        if not files:
            raise InputNotRecognized(f"{path}: no TORCH_TRACE log found")
        for file in files:
            log = read_torch_trace(file, max_bytes)
            logs.append(log)
            warnings = [ParseWarning(line=0, text="", reason=w) for w in log.warnings]
            if log.skipped_lines:
                warnings.append(
                    ParseWarning(
                        line=0,
                        text="",
                        reason=f"{file}: {log.skipped_lines} lines are no TORCH_TRACE record "
                        "(skipped)",
                    )
                )
            sources.append(SourceInfo(path=str(file), kinds=["torch_trace"], warnings=warnings))
    logs.sort(key=lambda log: (log.rank is None, log.rank or 0, log.path))
    data.torch_traces.extend(logs)
    if logs:
        data.dynamo.extend(dynamo_records(logs[0]))
    return sources
