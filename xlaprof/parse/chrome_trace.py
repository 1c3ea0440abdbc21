"""Chrome trace files (``*.trace.json``, ``*.trace.json.gz``, ``*.pt.trace.json``) to pandas.

Read as a stream (``xlaprof.parse.json_stream``) into the same columns as an xplane
(``xlaprof.parse.events.EventColumns``). Three things
make real files differ from the simple case:

- PyTorch-profiler (Kineto) traces time events in microseconds since the epoch
  (``1679055451546825``); in picoseconds that is past int64. Starts are kept as picoseconds
  after a per-file base (the earliest whole microsecond), so nothing overflows and fractional
  microseconds (roctracer writes nanosecond fractions) survive.
- Begin/end pairs (``ph: B`` ... ``ph: E`` on one thread) are events too: they are paired per
  thread, innermost first, like ``ph: X`` complete events.
- Kineto names processes by pid and labels them (``process_labels``: ``GPU 0``, ``CPU``); GPU
  kernels sit on pid = device, tid = stream. Planes are named like XSpace planes
  (``/device:GPU:0``, ``/host:CPU``), lines by thread name (``stream 7`` for GPU streams), so
  the device model reads both formats alike. ``cat`` (kernel, gpu_memcpy, cpu_op, ...) is kept
  in ``args``.
- The PyTorch profiler marks each step it records with a ``ProfilerStep#N`` range on the
  thread that calls ``prof.step()`` (and mirrors it on the GPU as a ``gpu_user_annotation``).
  On host planes that range gets ``step_num`` N, as ``jax.profiler.StepTraceAnnotation`` and
  ``xp.StepTrace`` get in an XSpace, so steps are numbered as the trace numbers them. The GPU
  mirror spans only the step's GPU work (it would hide the time the GPU waits), so it stays an
  annotation.
"""

from __future__ import annotations

import codecs
import json
import math
import os
import re
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from xlaprof.errors import BadCapture, InputTooLarge
from xlaprof.parse.events import (
    INT64_MAX,
    NUMBER_STATS,
    TEXT_STATS,
    WHOLE_STATS,
    EventColumns,
    host_from_filename,
)
from xlaprof.parse.json_stream import JsonStream
from xlaprof.safeio import (
    TooLarge,
    UnsafeFile,
    iter_gunzip_capped,
    open_regular,
)

# A Chrome trace file larger than this is refused (--max-size raises the cap). It is read as a
# stream, so memory follows its events, not its size.
MAX_TRACE_BYTES = 1024**3
# Bytes read (or inflated) at a time.
_TEXT_CHUNK = 4 * 1024**2
# Inflated gzip over compressed: real traces are 5-20x; beyond this a small file would need
# gigabytes of memory (a bomb of events), refused unless --max-size is given.
MAX_GZIP_RATIO = 32
# Microsecond timestamps whose nanoseconds fit int64 (epoch microseconds are ~1.7e15 today).
_MAX_TS_US = 9.2e15
# Picoseconds that fit int64 (about 106 days after the trace's first event).
_MAX_PS = 2.0**63 - 1024
# The PyTorch profiler's step range: ``ProfilerStep#12`` is step 12.
_PROFILER_STEP = re.compile(r"ProfilerStep#(\d+)")

# Kineto's activity categories: those on a GPU (its pid is the device) and those on the host,
# which name a plane when no metadata event does.
_DEVICE_CATEGORIES = frozenset(
    {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "gpu_instant_event"}
)
_HOST_CATEGORIES = frozenset(
    {
        "cpu_op",
        "cuda_runtime",
        "cuda_driver",
        "python_function",
        "user_annotation",
        "cpu_instant_event",
        "overhead",
        "Trace",
    }
)
# Kineto's CUPTI range profiler (``cuda_profiler_range``): each range carries its counters, but
# no time of its own: Kineto splits the profiled span evenly among the ranges ("the actual
# times do not really matter here so we can just split the total span up per range",
# CuptiRangeProfiler.cpp). Its events are kept (with their counters) on a plane of their own,
# ``RANGE_PLANE``, not on the GPU's: their times are not when the GPU ran anything.
_UNTIMED_CATEGORIES = frozenset({"cuda_profiler_range"})
RANGE_PLANE = "CUPTI range profiler"

if TYPE_CHECKING:
    import pandas as pd


def read_chrome_document(
    path: Path, limit: int | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The trace events of a Chrome trace file and its other top-level keys (Kineto's
    ``deviceProperties``, ...); a file that is not one raises ``BadCapture``. Every event is
    held: ``chrome_trace_frame`` reads the file as a stream instead."""
    events: list[dict[str, Any]] = []

    def keep(event: Any) -> None:
        if isinstance(event, dict):
            events.append(event)

    others = stream_chrome_events(path, keep, limit)
    return events, others


def stream_chrome_events(
    path: Path, handle: Callable[[Any], None], limit: int | None = None
) -> dict[str, Any]:
    """Each item of a Chrome trace's ``traceEvents`` to ``handle``, in file order, as the file
    is read (inflated and decoded a chunk at a time: ``json_stream``); its other top-level
    keys are returned. What is not a Chrome trace raises ``BadCapture`` (``InputTooLarge``
    over the size caps: ``limit`` bytes, ``--max-size``, else ``MAX_TRACE_BYTES``)."""
    path = Path(path)
    stream = JsonStream(_text_chunks(path, limit))
    try:
        others = stream.document("traceEvents", handle)
    except TooLarge as error:
        raise InputTooLarge(f"{error}; pass --max-size to read it anyway") from None
    except UnsafeFile as error:
        raise BadCapture(str(error)) from None
    except (RecursionError, MemoryError) as error:
        what = "nested too deeply" if isinstance(error, RecursionError) else "too large to parse"
        raise BadCapture(f"{path}: JSON {what}, not a Chrome trace") from None
    except UnicodeDecodeError:
        raise BadCapture(f"{path}: binary data, not a Chrome trace (JSON)") from None
    except json.JSONDecodeError as error:
        empty = stream.done and not stream.text.strip()
        what = "empty file" if empty else f"not valid JSON ({error.msg})"
        raise BadCapture(f"{path}: {what}, not a Chrome trace") from None
    if not stream.found:
        raise BadCapture(f"{path}: JSON without a traceEvents list, not a Chrome trace")
    return others or {}


def _text_chunks(path: Path, given: int | None) -> Iterator[str]:
    """The file's text a chunk at a time: read with the size cap (``given``: ``--max-size``,
    else ``MAX_TRACE_BYTES``), a ``.gz`` inflated as it goes (capped at ``MAX_GZIP_RATIO``
    times its size unless ``--max-size`` is given), decoded as UTF-8."""
    limit = MAX_TRACE_BYTES if given is None else given
    decoder = codecs.getincrementaldecoder("utf-8")()
    with os.fdopen(open_regular(path), "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            raise TooLarge(f"{path}: larger than {limit} bytes", size, limit)
        if path.name.endswith(".gz"):
            # A file that inflates far beyond what real traces do (about 5-20x) is refused
            # unless --max-size says otherwise: its events alone would exhaust memory.
            inflated = limit if given is not None else max(MAX_GZIP_RATIO * size, 64 * 1024**2)
            pieces = iter_gunzip_capped(handle, min(limit, inflated), str(path), size)
        else:
            pieces = _capped(handle, limit, path)
        for piece in pieces:
            yield decoder.decode(piece)
    yield decoder.decode(b"", final=True)


def _capped(handle: BinaryIO, limit: int, path: Path) -> Iterator[bytes]:
    """A plain file's bytes a chunk at a time, at most ``limit`` of them (it may grow)."""
    read = 0
    while chunk := handle.read(_TEXT_CHUNK):
        read += len(chunk)
        if read > limit:
            raise TooLarge(f"{path}: larger than {limit} bytes", read, limit)
        yield chunk


def _key(value: Any) -> Any:
    """A pid or tid usable as a dict key: damaged traces hold lists or objects there."""
    try:
        hash(value)
    except TypeError:
        return json.dumps(value, sort_keys=True, default=str)
    return value


def _args(event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def _event_args(event: dict[str, Any], end: dict[str, Any] | None) -> dict[str, Any]:
    """An event's ``args`` (with its end's, for a begin/end pair) and its ``cat``, as text."""
    args = dict(_args(event))
    if end is not None:
        args.update(_args(end))
    if event.get("cat") is not None:
        args["cat"] = event["cat"]
    if "cat" in args and not isinstance(args["cat"], str):
        args["cat"] = json.dumps(args["cat"], default=str)  # a damaged trace: keep it as text
    return args


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


class _Names:
    """Process and thread names from the ``ph: M`` metadata events, wherever they are in the
    file: the plane name per pid and the line name per (pid, tid)."""

    def __init__(self) -> None:
        self.names: dict[Any, str] = {}
        self.labels: dict[Any, str] = {}
        self.threads: dict[tuple[Any, Any], str] = {}

    def add(self, event: dict[str, Any]) -> None:
        args = _args(event)
        kind = event.get("name")
        if kind == "process_name":
            self.names[_key(event.get("pid"))] = str(args.get("name", ""))
        elif kind == "process_labels":
            self.labels[_key(event.get("pid"))] = str(args.get("labels", ""))
        elif kind == "thread_name":
            key = (_key(event.get("pid")), _key(event.get("tid")))
            self.threads[key] = str(args.get("name", "")).strip()

    def planes(self) -> dict[Any, str]:
        planes: dict[Any, str] = {}
        for pid in {*self.names, *self.labels}:
            label = self.labels.get(pid, "")
            if label.startswith("GPU "):
                planes[pid] = f"/device:GPU:{label[4:].strip()}"
            elif label == "CPU":
                planes[pid] = "/host:CPU"
            else:
                planes[pid] = self.names.get(pid) or str(pid)
        return planes

    def where(self, pid: Any, tid: Any, planes: dict[Any, str]) -> tuple[str, str]:
        """The plane and line of an event on (pid, tid)."""
        plane = planes.get(pid, str(pid))
        line = self.threads.get((pid, tid))
        if not line:
            line = f"stream {tid}" if plane.startswith("/device:") else str(tid)
        return plane, line


def chrome_trace_frame(
    path: Path, host: str | None = None, limit: int | None = None
) -> pd.DataFrame:
    """Complete (``ph: X``) and begin/end (``B``/``E``) events of a Chrome trace (a file over
    ``limit`` bytes, ``--max-size``, is refused), read as a stream into columns (``_Gather``):
    memory holds the frame being made and a chunk of text, never the JSON document."""
    gather = _Gather()
    others = stream_chrome_events(path, gather.event, limit)
    frame = gather.frame(host or host_from_filename(Path(path)))
    frame.attrs["devices"] = _devices(frame, others.get("deviceProperties"))
    # Kineto times events from ``baseTimeNanoseconds`` (epoch): what places another log's
    # wall-clock times (a TORCH_TRACE compile) on this trace's clock.
    base = others.get("baseTimeNanoseconds")
    if isinstance(base, int) and not isinstance(base, bool) and 0 <= base < 2**62:
        frame.attrs["epoch_offset_ns"] = base
    return frame


_PROMOTED = frozenset({*TEXT_STATS, *NUMBER_STATS, *WHOLE_STATS})


class _Gather:
    """The timed events of a Chrome trace as they stream by, in columns: start and duration
    (microseconds, float), a code for (pid, tid) and for the name, the ``args`` dict. Text is
    kept once per distinct value (names, ``args`` keys and text values), so ten million events
    of a few hundred distinct kernels hold a few hundred strings. What needs the whole file (the
    earliest start, process and thread names, which come last in Kineto's files) is applied
    when the frame is made."""

    def __init__(self) -> None:
        self.names = _Names()
        self.start_us = array("d")
        self.duration_us = array("d")
        self.where = array("q")  # code of (pid, tid)
        self.name = array("q")  # code of the name
        self.args: list[dict[str, Any] | None] = []
        self.wheres: dict[tuple[Any, Any], int] = {}
        self.texts: dict[str, str] = {}
        self.name_codes: dict[str, int] = {}
        self.steps: list[tuple[int, int]] = []  # (row, number): a ProfilerStep#N range
        self.promoted: list[int] = []  # rows whose args hold a promoted stat
        self.open_spans: dict[tuple[Any, Any], list[tuple[float, dict[str, Any]]]] = {}
        self.earliest = math.inf
        self.dropped = 0  # timestamps past any clock (1e308, 2^64): a damaged trace
        # per pid, the plane its events' categories say (for pids no metadata event names)
        self.kinds: dict[Any, str] = {}
        # (pid, tid) whose events had no Kineto category yet: each thread is placed by its
        # first event that has one, so a settled thread costs nothing per event
        self.unsettled: set[tuple[Any, Any]] = set()

    def event(self, event: Any) -> None:
        """One item of ``traceEvents``."""
        if not isinstance(event, dict):
            return
        phase = event.get("ph")
        if phase == "M":
            self.names.add(event)
            return
        if phase not in ("X", "B", "E"):
            return
        ts = _number(event.get("ts"))
        if ts is None:
            return
        if abs(ts) > _MAX_TS_US:
            self.dropped += 1
            return
        self.earliest = min(self.earliest, ts)
        key = (_key(event.get("pid")), _key(event.get("tid")))
        if phase == "B":
            self.open_spans.setdefault(key, []).append((ts, event))
        elif phase == "E":
            stack = self.open_spans.get(key)
            if stack:  # else an end whose begin is before the capture
                begin_ts, begin = stack.pop()
                self._add(begin, key, begin_ts, ts - begin_ts, event)
        else:
            self._add(event, key, ts, _number(event.get("dur")) or 0.0)

    def _add(
        self,
        event: dict[str, Any],
        key: tuple[Any, Any],
        ts: float,
        duration_us: float,
        end: dict[str, Any] | None = None,
    ) -> None:
        args = _event_args(event, end)
        name = str(event.get("name") or (end or {}).get("name") or "")
        row = len(self.args)
        if name.startswith("ProfilerStep#"):
            step = _PROFILER_STEP.fullmatch(name)
            if step is not None:
                self.steps.append((row, int(step.group(1))))
        if args:
            texts = self.texts
            args = {
                texts.setdefault(k, k): texts.setdefault(v, v) if isinstance(v, str) else v
                for k, v in args.items()
            }
            if not _PROMOTED.isdisjoint(args):
                self.promoted.append(row)
        self.args.append(args or None)
        if args and args.get("cat") in _UNTIMED_CATEGORIES:
            key = (RANGE_PLANE, key)  # a plane of their own (``frame``)
        code = self.wheres.get(key)
        if code is None:
            code = self.wheres[key] = len(self.wheres)
            self._note_kind(key, args)
        elif self.unsettled and key in self.unsettled:
            self._note_kind(key, args)
        self.where.append(code)
        code = self.name_codes.get(name)
        if code is None:
            code = self.name_codes[name] = len(self.name_codes)
        self.name.append(code)
        self.start_us.append(ts)
        self.duration_us.append(duration_us)

    def _note_kind(self, key: tuple[Any, Any], args: dict[str, Any]) -> None:
        """The plane a thread's first categorized event says its pid is, for pids no metadata
        event names.

        A trace cut down to its ``ph: X`` events (or written without ``process_name`` and
        ``process_labels``) still says where each event ran: Kineto's GPU activities have GPU
        categories (``kernel``, ``gpu_memcpy``, ...) and their device id in ``args.device``
        (else the pid, which Kineto sets to the device), its host activities host categories.
        A pid with one GPU stream is that device, whatever its other threads hold.
        """
        pid = key[0]
        category = args.get("cat")
        if category in _DEVICE_CATEGORIES:
            device = args.get("device", pid)
            number = device if isinstance(device, int) and not isinstance(device, bool) else None
            self.kinds[pid] = f"/device:GPU:{number if number is not None else pid}"
        elif category in _HOST_CATEGORIES:
            self.kinds.setdefault(pid, "/host:CPU")
        else:
            self.unsettled.add(key)
            return
        self.unsettled.discard(key)

    def _place(self, key: tuple[Any, Any], planes: dict[Any, str]) -> tuple[str, str]:
        """The plane and line of the events of ``key``: (pid, tid), or (``RANGE_PLANE``,
        (pid, tid)) for untimed profiler ranges, whose line names the plane they were on."""
        if key[0] == RANGE_PLANE and isinstance(key[1], tuple):
            pid, tid = key[1]
            plane, line = self.names.where(pid, tid, planes)
            return RANGE_PLANE, f"{plane.removeprefix('/device:')} {line}"
        return self.names.where(key[0], key[1], planes)

    def frame(self, host: str) -> pd.DataFrame:
        """The event frame (``events.EventColumns``)."""
        import numpy as np

        base_us = math.floor(self.earliest) if self.args else 0
        planes = self.names.planes()
        for pid, plane in self.kinds.items():  # pids no metadata event names
            planes.setdefault(pid, plane)
        wheres = [self._place(key, planes) for key in self.wheres]
        where = np.frombuffer(self.where, np.int64) if self.args else np.zeros(0, np.int64)
        for row, number in self.steps:  # ProfilerStep#N on host planes: step N
            if not wheres[int(where[row])][0].startswith("/device:"):
                self.args[row] = {**(self.args[row] or {}), "step_num": number}
                self.promoted.append(row)
        # ts - base_us is exact in floating point (both are close): then scale to picoseconds.
        with np.errstate(over="ignore", invalid="ignore"):  # a damaged trace: 1e308 us
            start_ps = np.frombuffer(self.start_us, np.float64) - base_us
            start_ps *= 1e6
            duration_ps = np.frombuffer(self.duration_us, np.float64) * 1e6
            placed = (np.abs(start_ps) < _MAX_PS) & (np.abs(duration_ps) < _MAX_PS)
        start = np.rint(np.where(placed, start_ps, 0.0)).astype(np.int64)
        duration = np.maximum(np.rint(np.where(placed, duration_ps, 0.0)).astype(np.int64), 0)
        # an end past int64 picoseconds is dropped too
        placed &= start <= INT64_MAX - np.where(placed, duration, 0)
        self.dropped += int((~placed).sum())
        columns = EventColumns(
            host=host,
            base_ns=base_us * 1000,
            start_ps=start,
            duration_ps=duration,
            planes=[plane for plane, _ in wheres],
            lines=[line for _, line in wheres],
            where=where,
            names=list(self.name_codes),
            name=np.frombuffer(self.name, np.int64) if self.args else np.zeros(0, np.int64),
            args=self.args,
            promoted=sorted(set(self.promoted)),
            keep=placed,
        )
        frame = columns.frame()
        frame.attrs["dropped_events"] = self.dropped
        return frame


def _devices(frame: pd.DataFrame, properties: Any) -> list[dict[str, Any]]:
    """One entry per GPU plane with events, named from Kineto's ``deviceProperties``."""
    named = {}
    for device in properties if isinstance(properties, list) else []:
        if isinstance(device, dict) and "id" in device:
            named[str(device["id"])] = device
    infos = []
    planes = frame.loc[frame["plane_kind"] == "device", "plane"].astype(str).unique()
    for plane in sorted(planes):
        device = plane.removeprefix("/device:")
        props = named.get(device.rpartition(":")[2], {})
        infos.append(
            {
                "plane": plane,
                "device": device,
                "kind": "GPU",
                "type": props.get("name"),
                "peak_flops_per_s": None,
                "peak_bytes_per_s": None,
            }
        )
    return infos
