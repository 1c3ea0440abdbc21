"""TORCH_TRACE logs (PyTorch's structured trace, what tlparse reads) as typed compiles.

``TORCH_TRACE=<dir>`` makes every ``torch.compile`` process write
``<dir>/dedicated_log_torch_trace_[rank_N_]<random>.log``. Each record is one line: a glog
prefix (``V1127 14:07:16.065000 9366 torch/_dynamo/utils.py:1952] ``), then one JSON object
whose first key names the record (``dynamo_start``, ``compilation_metrics``, ``artifact``, ...)
with the compile it belongs to (``frame_id``, ``frame_compile_id``, ``attempt``, ``rank``), and,
when the object says ``has_payload``, a payload on the lines that follow, each indented by one
tab. ``{"str": [filename, index]}`` records intern the file names that stacks refer to.

What is read here, per compile id ``frame/compile`` (all attempts together):
- ``dynamo_start``: the stack that called the compiled frame (outermost first, the compiled
  frame last);
- ``compilation_metrics``: the function, its file and first line, the compile time in all and
  in the backend, the failure (``fail_type``/``fail_reason``), restart reasons;
- ``artifact`` ``recompile_reasons`` (a JSON list: dynamo's guard failures, newest first) and
  ``dynamo_graph_break_reason`` (dynamo's graph-break message: the user's line and the reason);
- cache artifacts (``fx_graph_cache_hit``, ``aotautograd_cache_miss``, ...): counted by name;
- TorchTPU's own artifacts (``torchtpu_*``): counted by name, and for ``torchtpu_eager_stablehlo``
  the ``cache_hit``/``reason``/``compile_failed`` values wherever the record or its JSON payload
  carries them.

Everything else is skipped and counted. The reader is made for files someone sends: the file
is read under a size cap (gzip too), payloads are kept only where read and cut at
``MAX_PAYLOAD_CHARS``, a line that is not a record is counted rather than fatal, and a file with
no record at all raises ``InputNotRecognized`` with one line. Versions differ in keys: every key
is optional, and unknown keys are ignored.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xlaprof.errors import InputNotRecognized, InputTooLarge, InputUnreadable
from xlaprof.parse.dynamo_log import DynamoRecord
from xlaprof.parse.frames import is_library_file
from xlaprof.parse.units import loads as load_json
from xlaprof.safeio import TooLarge, UnsafeFile, gunzip_kept, iter_lines, read_capped

# ``V1127 14:07:16.065000 9366 torch/_dynamo/utils.py:1952] {...}`` (level, month and day,
# time, process id, source file:line); distributed jobs put ``[rank3]:`` before the level.
_PREFIX_RE = re.compile(
    r"^(?:\[rank(?P<rank>\d{1,9})\]:)?[VIWEC](?P<md>\d{4}) (?P<time>\d\d:\d\d:\d\d(?:\.\d+)?)\s+"
    r"(?P<pid>\d{1,12})\s+(?P<src>[^\]]*)\]\s?"
)
_RANK_FILE_RE = re.compile(r"rank_(\d+)")
_BREAK_AT_RE = re.compile(r"in user code at (\S+:\d+)")
_BREAK_REASON_RE = re.compile(r"Graph Break Reason:\s*(.+)")
_REASON_ID_RE = re.compile(r"^\s*(\d+/\d+):\s*")
# Dynamo's guard text ends with the user's line it guards, as a comment:
# ``scale == 2.0   # y = torch.tanh(x @ w) * scale  # compile_script.py:22 in step_fn``.
_GUARD_SITE_RE = re.compile(r"#\s*([^#\s]+:\d+) in \S+\s*$")
MAX_PAYLOAD_CHARS = 64 * 1024
MAX_RECORDS = 2_000_000
MAX_COMPILES = 100_000
MAX_LISTED = 50
MAX_GZIP_RATIO = 32
# Payloads read (the others are skipped line by line, never held).
_READ_PAYLOADS = ("recompile_reasons", "dynamo_graph_break_reason")
TORCHTPU_PREFIX = "torchtpu_"
TORCHTPU_BATCH = "torchtpu_eager_stablehlo"


@dataclass
class TpuBatch:
    """One TorchTPU fused-eager batch compiled to StableHLO (``torchtpu_eager_stablehlo``)."""

    cache_hit: bool | None
    reason: str | None
    compile_failed: bool | None


@dataclass
class Compile:
    """One dynamo compile (``frame/compile``: the frame and how often it was compiled before),
    all its attempts together. Seconds; None where the log does not say."""

    compile_id: str
    frame_id: int | None = None
    frame_compile_id: int | None = None
    function: str | None = None
    code: str | None = None  # "file:first line" of the compiled function
    stack: list[str] = field(default_factory=list)  # "file:line", outermost first
    seconds: float | None = None
    backend_seconds: float | None = None
    start_s: float | None = None  # epoch seconds
    end_s: float | None = None
    recompile_reasons: list[str] = field(default_factory=list)  # guard failures, newest first
    graph_breaks: list[str] = field(default_factory=list)  # dynamo's messages
    restart_reasons: list[str] = field(default_factory=list)
    fail_type: str | None = None
    fail_reason: str | None = None
    symbol_sites: list[str] = field(default_factory=list)  # where sizes turned dynamic
    cache: Counter[str] = field(default_factory=Counter)  # cache artifact name -> count
    graph_ops: int | None = None
    has_metrics: bool = False

    @property
    def callers(self) -> list[str]:
        """The user's frames that called the compiled function, innermost first (library
        frames, torch's own ``Module.__call__`` and the like, left out)."""
        return [f for f in reversed(self.stack[:-1]) if not is_library_file(_file_of(f))]

    @property
    def recompiled(self) -> bool:
        return bool(self.recompile_reasons) or bool(self.frame_compile_id)


@dataclass
class TorchTraceLog:
    """One process's TORCH_TRACE log."""

    path: str
    rank: int | None = None
    compiles: list[Compile] = field(default_factory=list)
    records: int = 0
    kinds: Counter[str] = field(default_factory=Counter)  # record kind -> count
    artifacts: Counter[str] = field(default_factory=Counter)  # artifact name -> count
    tpu_batches: list[TpuBatch] = field(default_factory=list)
    skipped_lines: int = 0  # lines that are no record (a damaged or mixed file)
    warnings: list[str] = field(default_factory=list)

    def cache_counts(self) -> dict[str, int]:
        """Cache artifacts (``*_cache_hit``, ``*_cache_miss``, ``*_cache_bypass``) by name."""
        return {k: v for k, v in sorted(self.artifacts.items()) if "_cache_" in k}

    @property
    def graph_breaks(self) -> int:
        return sum(len(c.graph_breaks) for c in self.compiles)

    @property
    def recompiles(self) -> int:
        return sum(1 for c in self.compiles if c.recompiled)


def _file_of(frame: str) -> str:
    return frame.rpartition(":")[0]


def process_of(head: bytes) -> int | None:
    """The process id in the first record of a log's first bytes, or None."""
    line = head.split(b"\n", 1)[0].decode("utf-8", errors="replace")
    match = _PREFIX_RE.match(line)
    return int(match.group("pid")) if match is not None else None


def looks_like_torch_trace(head: bytes) -> bool:
    """Whether the first bytes of a file are a TORCH_TRACE record (a glog prefix, then ``{``)."""
    line = head.split(b"\n", 1)[0].decode("utf-8", errors="replace")
    match = _PREFIX_RE.match(line)
    return match is not None and line[match.end() :].lstrip().startswith("{")


def read_torch_trace(path: Path, max_bytes: int) -> TorchTraceLog:
    """Parse the TORCH_TRACE log at ``path`` (``.gz`` too), under ``max_bytes``."""
    path = Path(path)
    try:
        if path.stat().st_size > max_bytes:
            raise TooLarge(f"{path}: over the {max_bytes:,}-byte limit")
        cut = False
        if path.name.endswith(".gz"):
            raw = read_capped(path, max_bytes)
            limit = min(max_bytes, MAX_GZIP_RATIO * len(raw))
            text, cut = gunzip_kept(raw, limit, name=str(path))
            lines: Iterable[bytes] = text.splitlines(keepends=True)
        else:
            lines = iter_lines(path, limit=max_bytes)
        ends = _LastLine()
        log = parse_torch_trace(_decoded(ends.watch(lines)), str(path))
    except TooLarge as error:
        raise InputTooLarge(f"{error}; pass --max-size to read it anyway") from None
    except UnsafeFile as error:
        if "gzip" in str(error):
            raise InputUnreadable(f"{error}") from None
        raise InputUnreadable(f"{path}: not a regular file (a FIFO or a device?)") from None
    except OSError as error:
        raise InputUnreadable(f"{path}: cannot be read ({error.strerror})") from None
    if not log.records:
        raise InputNotRecognized(f"{path}: no TORCH_TRACE record found")
    if cut or ends.cut:
        # a writer stops at a newline: a last line without one is a file cut short
        how = "its gzip stream ends early" if cut else "its last line is cut"
        log.warnings.append(f"damaged: {how}; the {log.records:,} records before the cut are kept")
    if log.rank is None and (match := _RANK_FILE_RE.search(path.name)) is not None:
        log.rank = int(match.group(1))
    return log


@dataclass
class _LastLine:
    """Whether the last line of what it watched ends without a newline (a cut file)."""

    cut: bool = False

    def watch(self, lines: Iterable[bytes]) -> Iterator[bytes]:
        for raw in lines:
            self.cut = not raw.endswith(b"\n")
            yield raw


def _decoded(lines: Iterable[bytes]) -> Iterator[str]:
    for raw in lines:
        yield raw.decode("utf-8", errors="replace").rstrip("\r\n")


@dataclass
class _Pending:
    """The record whose payload lines are being read."""

    kind: str
    meta: dict[str, Any]
    compile: Compile | None
    keep: bool
    lines: list[str] = field(default_factory=list)
    size: int = 0


def parse_torch_trace(lines: Iterable[str], path: str = "<log>") -> TorchTraceLog:
    """The compiles of a TORCH_TRACE log given as text lines (see the module docstring)."""
    reader = _Reader(TorchTraceLog(path=path))
    for line in lines:
        if line.startswith("\t"):
            reader.payload(line)
        elif not reader.record(line):
            break
    reader.flush()
    return reader.log


@dataclass
class _Reader:
    """The state of one pass over a log: compiles by id, interned file names, the record
    whose payload lines come next."""

    log: TorchTraceLog
    by_id: dict[str, Compile] = field(default_factory=dict)
    strings: dict[int, str] = field(default_factory=dict)
    pending: _Pending | None = None

    def payload(self, line: str) -> None:
        pending = self.pending
        if pending is not None and pending.keep and pending.size < MAX_PAYLOAD_CHARS:
            pending.lines.append(line[1:])
            pending.size += len(line)

    def flush(self) -> None:
        if self.pending is not None:
            _finish(self.log, self.pending)
            self.pending = None

    def record(self, line: str) -> bool:
        """Read one record line; False once the record cap is reached."""
        self.flush()
        log = self.log
        if log.records >= MAX_RECORDS:
            log.warnings.append(f"{log.path}: stopped after {MAX_RECORDS:,} records")
            return False
        record = _record(line)
        if record is None:
            if line.strip():
                log.skipped_lines += 1
            return True
        kind, meta, rank = record
        log.records += 1
        log.kinds[kind] += 1
        if rank is not None and log.rank is None:
            log.rank = rank
        if kind == "str":
            _intern(self.strings, meta.get("str"))
            return True
        compile_ = _compile_of(meta, self.by_id, log)
        self.pending = _apply(log, kind, meta, compile_, self.strings)
        return True


def _record(line: str) -> tuple[str, dict[str, Any], int | None] | None:
    """A line's record kind, its JSON object and the rank the prefix names, or None."""
    match = _PREFIX_RE.match(line)
    if match is None:
        return None
    body = line[match.end() :].strip()
    if not body.startswith("{"):
        return None
    try:
        value = load_json(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or not value:
        return None
    kind = next(iter(value))
    rank = _integer(value.get("rank"))
    if rank is None and match.group("rank") is not None:
        rank = int(match.group("rank"))
    return str(kind), value, rank


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if number == number and abs(number) < 1e18 else None


def _text(value: Any) -> str | None:
    return value[:MAX_PAYLOAD_CHARS] if isinstance(value, str) else None


def _intern(strings: dict[int, str], value: Any) -> None:
    if isinstance(value, list) and len(value) == 2:
        name, index = value
        if isinstance(name, str) and _integer(index) is not None and len(strings) < 100_000:
            strings[index] = name[:4096]


def _compile_of(
    meta: dict[str, Any], by_id: dict[str, Compile], log: TorchTraceLog
) -> Compile | None:
    """The compile a record belongs to (made at its first record), or None (a record outside
    any compile: TorchTPU's eager batches, runtime records)."""
    frame, count = _integer(meta.get("frame_id")), _integer(meta.get("frame_compile_id"))
    if frame is None or count is None:
        metrics = meta.get("compilation_metrics")
        compile_id = metrics.get("compile_id") if isinstance(metrics, dict) else None
        if not isinstance(compile_id, str) or "/" not in compile_id:
            return None
        head, _, tail = compile_id.partition("/")
        frame, count = _integer(_int_or_none(head)), _integer(_int_or_none(tail))
        if frame is None or count is None:
            return None
    key = f"{frame}/{count}"
    found = by_id.get(key)
    if found is None and len(by_id) >= MAX_COMPILES:
        if len(by_id) == MAX_COMPILES:
            log.warnings.append(f"{log.path}: only the first {MAX_COMPILES:,} compiles are kept")
            by_id[""] = Compile(compile_id="")  # said once
        return None
    if found is None:
        found = Compile(compile_id=key, frame_id=frame, frame_compile_id=count)
        by_id[key] = found
        log.compiles.append(found)
    return found


def _int_or_none(text: str) -> int | None:
    text = text.strip().lstrip("!")  # "!0/0": a compile id of compiled autograd
    return int(text) if text.isdigit() and len(text) < 12 else None


def _apply(
    log: TorchTraceLog,
    kind: str,
    meta: dict[str, Any],
    compile_: Compile | None,
    strings: dict[int, str],
) -> _Pending | None:
    """Fold one record into its compile; the payload reader for it, if it has a payload."""
    value = meta.get(kind)
    if compile_ is not None and isinstance(value, dict):
        _fold(compile_, kind, value, strings)
    name = None
    if kind == "artifact" and isinstance(value, dict):
        name = _text(value.get("name"))
        if name is not None:
            log.artifacts[name[:200]] += 1
            if compile_ is not None and "_cache_" in name:
                compile_.cache[name[:200]] += 1
    elif kind.startswith(TORCHTPU_PREFIX):
        name = kind
        log.artifacts[kind[:200]] += 1
    if not meta.get("has_payload"):
        if name == TORCHTPU_BATCH:
            _tpu_batch(log, meta, None)
        return None
    keep = name in _READ_PAYLOADS or name == TORCHTPU_BATCH
    return _Pending(kind=name or kind, meta=meta, compile=compile_, keep=keep)


def _fold(compile_: Compile, kind: str, value: dict[str, Any], strings: dict[int, str]) -> None:
    """What a compile's own record (its start, metrics, a size made dynamic) says of it."""
    if kind == "dynamo_start":
        compile_.stack = _stack(value.get("stack"), strings)
    elif kind == "compilation_metrics":
        _metrics(compile_, value)
    elif kind == "create_symbol":
        frames = _stack(value.get("user_stack"), strings)
        if frames and len(compile_.symbol_sites) < MAX_LISTED:
            compile_.symbol_sites.append(frames[-1])


def _finish(log: TorchTraceLog, pending: _Pending) -> None:
    if not pending.keep:
        return
    payload = "\n".join(pending.lines)[:MAX_PAYLOAD_CHARS]
    compile_ = pending.compile
    if pending.kind == "recompile_reasons" and compile_ is not None:
        try:
            reasons = load_json(payload)
        except (ValueError, RecursionError):
            reasons = [payload] if payload else []
        if isinstance(reasons, list):
            compile_.recompile_reasons = [
                r[:MAX_PAYLOAD_CHARS] for r in reasons[:MAX_LISTED] if isinstance(r, str)
            ]
    elif pending.kind == "dynamo_graph_break_reason" and compile_ is not None:
        if len(compile_.graph_breaks) < MAX_LISTED:
            compile_.graph_breaks.append(payload)
    elif pending.kind == TORCHTPU_BATCH:
        _tpu_batch(log, pending.meta, payload)


def _tpu_batch(log: TorchTraceLog, meta: dict[str, Any], payload: str | None) -> None:
    """A TorchTPU batch's cache result, from the record's keys or its JSON payload."""
    if len(log.tpu_batches) >= MAX_RECORDS:
        return
    sources = [meta, meta.get(TORCHTPU_BATCH), meta.get("artifact")]
    if payload:
        with contextlib.suppress(ValueError, RecursionError):
            sources.append(load_json(payload))
    found: dict[str, Any] = {}
    for source in sources:
        if isinstance(source, dict):
            for key in ("cache_hit", "reason", "compile_failed"):
                if key in source and key not in found:
                    found[key] = source[key]
    hit, failed = found.get("cache_hit"), found.get("compile_failed")
    log.tpu_batches.append(
        TpuBatch(
            cache_hit=hit if isinstance(hit, bool) else None,
            reason=_text(found.get("reason")),
            compile_failed=failed if isinstance(failed, bool) else None,
        )
    )


def _stack(frames: Any, strings: dict[int, str]) -> list[str]:
    """A structured stack (``[{"line", "name", "filename"}]``, filename an interned index or a
    name) as "file:line" strings, outermost first."""
    out: list[str] = []
    for frame in frames if isinstance(frames, list) else []:
        if not isinstance(frame, dict):
            continue
        line, name = _integer(frame.get("line")), frame.get("filename")
        index = _integer(name)
        filename = strings.get(index) if index is not None else _text(name)
        if filename and line is not None:
            out.append(f"{filename}:{line}")
        if len(out) >= 64:
            break
    return out


def _metrics(compile_: Compile, value: dict[str, Any]) -> None:
    compile_.has_metrics = True
    compile_.function = _text(value.get("co_name")) or compile_.function
    filename, first = _text(value.get("co_filename")), _integer(value.get("co_firstlineno"))
    if filename and first is not None:
        compile_.code = f"{filename}:{first}"
    seconds = _number(value.get("entire_frame_compile_time_s"))
    if seconds is None and (micros := _number(value.get("duration_us"))) is not None:
        seconds = micros / 1e6
    compile_.seconds = seconds
    compile_.backend_seconds = _number(value.get("backend_compile_time_s"))
    compile_.start_s = _number(value.get("start_time"))
    end_us = _number(value.get("end_time_us"))
    if end_us is not None:
        compile_.end_s = end_us / 1e6
    elif compile_.start_s is not None and seconds is not None:
        compile_.end_s = compile_.start_s + seconds
    compile_.fail_type = _text(value.get("fail_type"))
    compile_.fail_reason = _text(value.get("fail_reason"))
    restarts = value.get("restart_reasons")
    if isinstance(restarts, list):
        compile_.restart_reasons = [r for r in restarts[:MAX_LISTED] if isinstance(r, str)]
    compile_.graph_ops = _integer(value.get("graph_op_count"))
    reason = _text(value.get("recompile_reason"))
    if reason and not compile_.recompile_reasons:
        compile_.recompile_reasons = [reason]


# -- what the analyzers read ------------------------------------------------------------


def reason_text(reason: str) -> str:
    """A guard failure without its cache entry's id (``0/0: tensor 'x' ...`` -> ``tensor ...``)."""
    return _REASON_ID_RE.sub("", reason, count=1)


def guard_site(reason: str) -> str | None:
    """The user's line dynamo names at the end of a guard (``# ... # file.py:22 in fn``)."""
    match = _GUARD_SITE_RE.search(reason)
    return match.group(1) if match else None


def break_site(message: str) -> str | None:
    """The user's line of a graph-break message."""
    match = _BREAK_AT_RE.search(message)
    return match.group(1) if match else None


def break_reason(message: str) -> str | None:
    match = _BREAK_REASON_RE.search(message)
    return match.group(1).strip() if match else None


def dynamo_records(log: TorchTraceLog) -> list[DynamoRecord]:
    """The log's compiles as the records ``xlaprof run`` keeps of a live ``torch.compile``
    (``dynamo.jsonl``): a ``recompile`` per compile a guard failure caused, a ``graph_break``
    per break dynamo reported, a ``compile`` per compile with its seconds. No step is known
    (the log has none): a capture of the same run places them (``tables.host_steps``)."""
    records: list[DynamoRecord] = []
    for compile_ in log.compiles:
        frames = compile_.callers
        if compile_.recompile_reasons:
            newest = compile_.recompile_reasons[0]
            records.append(
                DynamoRecord(
                    kind="recompile",
                    step=None,
                    user_frames=frames,
                    function=compile_.function,
                    code=compile_.code,
                    reasons=[reason_text(r) for r in compile_.recompile_reasons],
                    compile_id=compile_.compile_id,
                    message="\n".join(compile_.recompile_reasons),
                    site=guard_site(newest),
                )
            )
        for message in compile_.graph_breaks:
            reason = break_reason(message)
            records.append(
                DynamoRecord(
                    kind="graph_break",
                    step=None,
                    user_frames=frames,
                    code=break_site(message),
                    reasons=[reason] if reason else [],
                    compile_id=compile_.compile_id,
                    message=message,
                )
            )
        records.append(
            DynamoRecord(
                kind="compile",
                step=None,
                user_frames=frames,
                function=compile_.function,
                code=compile_.code,
                compile_id=compile_.compile_id,
                seconds=compile_.seconds,
            )
        )
    return records
