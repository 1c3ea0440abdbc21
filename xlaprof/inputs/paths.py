"""Paths to analysis inputs, in one place: report/log files, run directories, trace folders.

Every way a path can be wrong maps to one ``XlaprofError`` subclass (and so one exit code):
missing, unreadable, a directory that is not a run, empty, binary, too large, or text that holds
neither a metrics report nor PT_XLA_DEBUG output. A file may hold both kinds (a job's stderr with
the debug analysis and a final metrics report): both parsers read every file.

Files are one job's output and make one analysis part. A run folder may hold several process
runs (one per rank); each is analyzed on its own, since steps and warm-up are per process.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from xlaprof.errors import (
    InputEmpty,
    InputNotFound,
    InputNotRecognized,
    InputNotText,
    InputTooLarge,
    InputUnreadable,
    RunDirError,
)
from xlaprof.model.input import AnalysisInput, input_from_run
from xlaprof.model.parts import Part, RunSummary, SourceInfo
from xlaprof.model.request import DEFAULT_MAX_INPUT_BYTES, PodSettings
from xlaprof.parse.debug_log import DebugLog, parse_debug_log
from xlaprof.parse.metrics_report import MetricsParser, MetricsParseResult
from xlaprof.parse.units import format_bytes
from xlaprof.rundir.reader import Run, load_runs
from xlaprof.safeio import UnsafeFile, iter_lines

if TYPE_CHECKING:
    from xlaprof.inputs.formats import Sniffed

_SNIFF_BYTES = 8192
# Share of undecodable bytes in the first block above which a file is taken as binary.
_BINARY_REPLACEMENT_SHARE = 0.05


def _check_path(path: Path, max_bytes: int) -> int:
    """Raise the error that says what is wrong with ``path`` as a text input; its size."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise InputNotFound(f"{path}: no such file or directory") from None
    except OSError as error:
        raise InputUnreadable(f"{path}: cannot be read ({error.strerror})") from None
    if path.is_dir():
        raise RunDirError(
            f"{path}: is a directory, not a run directory (no run.json) or a report file"
        )
    if stat.st_size > max_bytes:
        raise InputTooLarge(
            f"{path}: {format_bytes(stat.st_size)} is over the {format_bytes(max_bytes)} limit; "
            f"pass --max-size {_size_hint(stat.st_size)} to read it anyway"
        )
    return stat.st_size


def _open_text(path: Path, max_bytes: int) -> Iterator[bytes]:
    """The lines of ``path``, after the checks a text input must pass (binary, empty, FIFO)."""
    try:
        lines = iter_lines(path, limit=max_bytes)
        first = next(lines, b"")
    except PermissionError:
        raise InputUnreadable(f"{path}: permission denied") from None
    except UnsafeFile:
        raise InputUnreadable(f"{path}: not a regular file (a FIFO or a device?)") from None
    except OSError as error:
        raise InputUnreadable(f"{path}: cannot be read ({error.strerror})") from None
    head = [first]
    size = len(first)
    while size < _SNIFF_BYTES and (line := next(lines, None)) is not None:
        head.append(line)
        size += len(line)
    block = b"".join(head)[:_SNIFF_BYTES]
    if b"\x00" in block or _replacement_share(block) > _BINARY_REPLACEMENT_SHARE:
        raise InputNotText(f"{path}: binary data, not a metrics report or PT_XLA_DEBUG log")
    return itertools.chain(head, lines)


def read_text(path: Path, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> str:
    """Read a (small) text input whole, raising the error that says what is wrong with it."""
    _check_path(path, max_bytes)
    data = b"".join(_open_text(path, max_bytes))
    if not data.strip():
        raise InputEmpty(f"{path}: the file is empty")
    return data.decode("utf-8", errors="replace")


def parse_text_file(
    path: Path, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> tuple[MetricsParseResult, DebugLog]:
    """Both parsers over one file in one streamed pass: memory follows what is kept, not size.

    Lines are split on ``\\n`` only, so line numbers (and byte offsets) agree with other tools.
    """
    _check_path(path, max_bytes)
    lines = _open_text(path, max_bytes)
    metrics = MetricsParser()
    blank = True

    def decoded() -> Iterator[str]:
        nonlocal blank
        for lineno, raw in enumerate(lines, start=1):
            if blank and raw.strip():
                blank = False
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            metrics.line(lineno, text)
            yield text

    try:
        debug = parse_debug_log(decoded())
    except OSError as error:
        raise InputUnreadable(f"{path}: cannot be read ({error.strerror})") from None
    if blank:
        raise InputEmpty(f"{path}: the file is empty")
    return metrics.finish(), debug


def _replacement_share(block: bytes) -> float:
    text = block.decode("utf-8", errors="replace")
    # A multi-byte character cut at the block's end is not evidence of binary data.
    return text[:-4].count("\ufffd") / max(len(text), 1)


def _size_hint(size: int) -> str:
    gib = size / 1024**3
    return f"{int(gib) + 1}GB" if gib >= 1 else f"{int(size / 1024**2) + 1}MB"


def load_text_inputs(
    paths: list[Path], max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> tuple[AnalysisInput, list[SourceInfo]]:
    """Parse report/log files into one ``AnalysisInput`` (taken as one job's output)."""
    data = AnalysisInput()
    sources = []
    for path in paths:
        metrics, debug = parse_text_file(path, max_bytes)
        kinds = []
        if metrics.reports:
            kinds.append("metrics_report")
        if not debug.empty:
            kinds.append("debug_log")
        if not kinds:
            raise InputNotRecognized(
                f"{path}: no metrics report or PT_XLA_DEBUG output found "
                "(expected 'Metric:'/'Counter:' blocks or 'Compilation Analysis:' lines)"
            )
        data.reports.extend(metrics.reports)
        data.debug.merge(debug)
        sources.append(
            SourceInfo(
                path=os.fspath(path),
                kinds=kinds,
                reports=metrics.reports_seen,
                debug_events=len(debug.events),
                warnings=metrics.warnings + debug.warnings,
            )
        )
    return data, sources


def load_parts(
    paths: list[Path],
    max_bytes: int,
    warmup_steps: int = 2,
    session: str | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    capture_limit: int | None = None,
    pod: PodSettings | None = None,
) -> list[Part]:
    """``paths`` as parts (``load_inputs`` of each path sniffed once)."""
    from xlaprof.inputs.formats import sniff_path

    return load_inputs(
        [sniff_path(p) for p in paths],
        max_bytes,
        warmup_steps,
        session,
        scheduler,
        workers,
        capture_limit,
        pod,
    )


def load_inputs(
    sniffed: list[Sniffed],
    max_bytes: int,
    warmup_steps: int = 2,
    session: str | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    capture_limit: int | None = None,
    pod: PodSettings | None = None,
) -> list[Part]:
    """The sniffed paths (``xlaprof.inputs.formats``) as parts, each read once by its format:
    captures (each file capped at ``capture_limit``, ``--max-size``; None: each reader's own
    cap), run directories, or report and log files taken as one job's output (each capped at
    ``max_bytes``). TORCH_TRACE logs (a log, the folder TORCH_TRACE wrote, or a folder holding
    one) join the one capture given with them, or the files. ``pod``: how a capture of several
    hosts is read, as the environment set it (the edge). A saved result is read alone
    (``xlaprof.inputs.saved``), never with other inputs."""
    from xlaprof.inputs.formats import format_of
    from xlaprof.inputs.torch_traces import add_torch_traces
    from xlaprof.rundir.schema import TORCH_TRACE_DIR

    formats = [format_of(s).name for s in sniffed]
    if "saved_result" in formats and len(sniffed) > 1:
        saved = sniffed[formats.index("saved_result")].path
        raise InputNotRecognized(f"{saved}: a saved result is read alone, not with other inputs")
    logs = [s.path for s, name in zip(sniffed, formats, strict=True) if name == "torch_trace"]
    others = [s for s in sniffed if s.path not in logs]
    # a folder holding the run's TORCH_TRACE folder (beside its captures, or all that an
    # `xlaprof run` of a script without torch_xla left)
    beside = [s for s in others if s.torch_beside]
    logs += [s.path / TORCH_TRACE_DIR for s in beside]
    others = [s for s in others if s not in beside or s.capture]
    if others and all(s.capture for s in others):
        parts = [
            _trace_part(s.path, session, scheduler, workers, capture_limit, pod) for s in others
        ]
        if logs:  # TORCH_TRACE logs of the run a capture shows: one part, joined
            if len(parts) != 1:
                raise InputNotRecognized(
                    f"{logs[0]}: give TORCH_TRACE logs with one capture (of the same run)"
                )
            parts[0].sources += add_torch_traces(parts[0].data, logs, max_bytes)
            parts[0].data.warmup_steps = warmup_steps
        return parts
    if logs and not others:
        data = AnalysisInput(warmup_steps=warmup_steps)
        sources = add_torch_traces(data, logs, max_bytes)
        return [Part(name=logs[0].name, data=data, sources=sources)]
    run_roots = [s for s in sniffed if s.runs]
    if not run_roots:
        data, sources = load_text_inputs([s.path for s in others], max_bytes)
        sources += add_torch_traces(data, logs, max_bytes)
        data.warmup_steps = warmup_steps
        return [Part(name="files", data=data, sources=sources)]
    if len(run_roots) != len(sniffed):
        mixed = [str(s.path) for s in sniffed if s not in run_roots]
        raise InputNotRecognized(
            f"{mixed[0]}: give either run directories or report/log files, not both"
        )
    runs = [run for root in run_roots for run in load_runs(root.path, list(root.runs))]
    active, notes = _runs_to_analyze(runs)
    parts = []
    for run in active:
        data = input_from_run(run, warmup_steps)
        source = SourceInfo(
            path=str(run.path),
            kinds=["run"],
            reports=len(data.reports),
            debug_events=len(data.debug.events),
            warnings=data.debug.warnings,
        )
        parts.append(
            Part(
                name=run.path.name,
                data=data,
                sources=[source],
                run=run,
                run_summary=_run_summary(run, notes.get(run.path, [])),
            )
        )
    return parts


def _runs_to_analyze(runs: list[Run]) -> tuple[list[Run], dict[Path, list[str]]]:
    """The runs analyzed, and for each the notes on runs left out because of it.

    A run nested in another run given here (``xlaprof.profile()`` inside ``xlaprof run``)
    holds the same steps as its outer run, which has the debug analysis and graphs: it is left
    out, and the outer run says so. A launcher process that never ran a step (xmp.spawn's
    parent) has nothing to say: it is left out too, with a note, unless no run has steps.
    """
    by_path = {str(run.path.resolve()): run for run in runs}
    notes: dict[Path, list[str]] = {}
    kept = []
    for run in runs:
        outer = by_path.get(str(Path(run.info.outer_run).resolve())) if run.info.outer_run else None
        if outer is not None and outer is not run:
            notes.setdefault(outer.path, []).append(
                f"{run.path}: an xlaprof.profile() nested in this run, over the same steps "
                f"({run.steps_recorded} steps): not analyzed here; name it to analyze it alone"
            )
        else:
            kept.append(run)
    active = [r for r in kept if r.info.steps_recorded or r.step_rows()] or kept
    if len(active) < len(kept) and active:
        idle = [str(r.path) for r in kept if r not in active]
        notes.setdefault(active[0].path, []).append(
            f"not analyzed: {', '.join(idle)} (no steps recorded: a launcher process, or one "
            "that never synced)"
        )
    return active, notes


def _trace_part(
    path: Path,
    session: str | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    limit: int | None = None,
    pod: PodSettings | None = None,
) -> Part:
    """A capture file or a logdir of captures: device tables, timeline and host skew."""
    from xlaprof.inputs.traces import load_trace
    from xlaprof.tables.device.events import STATS_READ

    trace = load_trace(
        path,
        session=session,
        workers=workers,
        scheduler=scheduler,
        max_size=limit,
        pod=pod,
        args=STATS_READ,  # the stats the analysis reads, not every one
        read_only=True,  # it writes into none of the events' columns
    )
    trace.partial_edges = True
    source = SourceInfo(path=str(path), kinds=["trace"], reports=0, debug_events=0)
    return Part(
        name=path.name, data=AnalysisInput(), sources=[source], trace=trace, trace_path=str(path)
    )


def _run_summary(run: Run, notes: list[str] | None = None) -> RunSummary:
    info = run.info
    return RunSummary(
        path=str(run.path),
        schema=info.schema,
        status=info.status,
        exit_code=info.exit_code,
        detail=info.detail,
        steps_recorded=run.steps_recorded,
        device_kind=info.device_kind,
        device_count=info.device_count,
        rank=info.rank,
        torch_xla_version=info.torch_xla_version,
        traces=[str(p) for p in run.trace_files()],
        warnings=[*info.warnings, *run.load_warnings, *(notes or [])],
    )
