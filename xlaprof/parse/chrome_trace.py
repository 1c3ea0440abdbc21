"""Chrome trace files (``*.trace.json``, ``*.trace.json.gz``, ``*.pt.trace.json``) to pandas.

Read in the same columns as an xplane (``xlaprof.parse.events.events_frame``). Three things
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

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.errors import BadCapture, InputTooLarge
from xlaprof.parse.events import Columns, events_frame, host_from_filename
from xlaprof.safeio import (
    TooLarge,
    UnsafeFile,
    gunzip_capped,
    read_capped,
)

# A Chrome trace is parsed whole (JSON): larger ones are refused rather than exhausting memory
# (--max-size raises the cap).
MAX_TRACE_BYTES = 1024**3
# Inflated gzip over compressed: real traces are 5-20x; beyond this a small file would need
# gigabytes of memory (a bomb of events), refused unless --max-size is given.
MAX_GZIP_RATIO = 32
# Microsecond timestamps whose nanoseconds fit int64 (epoch microseconds are ~1.7e15 today).
_MAX_TS_US = 9.2e15
# Picoseconds that fit int64 (about 106 days after the trace's first event).
_MAX_PS = 2.0**63 - 1024
# The PyTorch profiler's step range: ``ProfilerStep#12`` is step 12.
_PROFILER_STEP = re.compile(r"ProfilerStep#(\d+)")

if TYPE_CHECKING:
    import pandas as pd


def read_chrome_document(
    path: Path, limit: int | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The trace events of a Chrome trace file and its other top-level keys (Kineto's
    ``deviceProperties``, ...); a file that is not one raises ``BadCapture``."""
    path = Path(path)
    given = limit is not None  # --max-size: the ratio cap on inflation yields to it
    limit = MAX_TRACE_BYTES if limit is None else limit
    try:
        raw = read_capped(path, limit)
        if path.name.endswith(".gz"):
            # JSON is parsed whole (~8x its size in memory): a file that inflates far beyond
            # what real traces do (about 5-20x) is refused unless --max-size says otherwise.
            inflated = limit if given else max(MAX_GZIP_RATIO * len(raw), 64 * 1024**2)
            raw = gunzip_capped(raw, min(limit, inflated), name=str(path))
    except TooLarge as error:
        raise InputTooLarge(f"{error}; pass --max-size to read it anyway") from None
    except UnsafeFile as error:
        raise BadCapture(str(error)) from None
    try:
        document = json.loads(raw.decode("utf-8"))
    except (RecursionError, MemoryError) as error:
        what = "nested too deeply" if isinstance(error, RecursionError) else "too large to parse"
        raise BadCapture(f"{path}: JSON {what}, not a Chrome trace") from None
    except UnicodeDecodeError:
        raise BadCapture(f"{path}: binary data, not a Chrome trace (JSON)") from None
    except json.JSONDecodeError as error:
        what = "empty file" if error.doc.strip() == "" else f"not valid JSON ({error.msg})"
        raise BadCapture(f"{path}: {what}, not a Chrome trace") from None
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        raise BadCapture(f"{path}: JSON without a traceEvents list, not a Chrome trace")
    others = (
        {k: v for k, v in document.items() if k != "traceEvents"}
        if isinstance(document, dict)
        else {}
    )
    return [event for event in events if isinstance(event, dict)], others


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


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _plane_names(
    events: list[dict[str, Any]],
) -> tuple[dict[Any, str], dict[tuple[Any, Any], str]]:
    """Plane name per pid and line name per (pid, tid), from the ``ph: M`` metadata events."""
    names: dict[Any, str] = {}
    labels: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for event in events:
        if event.get("ph") != "M":
            continue
        args = _args(event)
        kind = event.get("name")
        if kind == "process_name":
            names[_key(event.get("pid"))] = str(args.get("name", ""))
        elif kind == "process_labels":
            labels[_key(event.get("pid"))] = str(args.get("labels", ""))
        elif kind == "thread_name":
            key = (_key(event.get("pid")), _key(event.get("tid")))
            threads[key] = str(args.get("name", "")).strip()
    planes: dict[Any, str] = {}
    for pid in {*names, *labels}:
        label = labels.get(pid, "")
        if label.startswith("GPU "):
            planes[pid] = f"/device:GPU:{label[4:].strip()}"
        elif label == "CPU":
            planes[pid] = "/host:CPU"
        else:
            planes[pid] = names.get(pid) or str(pid)
    return planes, threads


def chrome_trace_frame(
    path: Path, host: str | None = None, limit: int | None = None
) -> pd.DataFrame:
    """Complete (``ph: X``) and begin/end (``B``/``E``) events of a Chrome trace (a file over
    ``limit`` bytes, ``--max-size``, is refused)."""
    events, others = read_chrome_document(path, limit)
    planes, threads = _plane_names(events)
    timed = []
    dropped = 0  # timestamps past any clock (1e308, 2^64): a damaged trace
    for event in events:
        phase = event.get("ph")
        if phase in ("X", "B", "E"):
            ts = _number(event.get("ts"))
            if ts is not None and abs(ts) <= _MAX_TS_US:
                timed.append((ts, event))
            elif ts is not None:
                dropped += 1
    base_us = math.floor(min((ts for ts, _ in timed), default=0.0))
    columns = Columns(base_ns=base_us * 1000, dropped=dropped)
    open_spans: dict[tuple[Any, Any], list[tuple[float, dict[str, Any]]]] = {}
    for ts, event in timed:
        phase = event["ph"]
        key = (_key(event.get("pid")), _key(event.get("tid")))
        if phase == "B":
            open_spans.setdefault(key, []).append((ts, event))
            continue
        if phase == "E":
            stack = open_spans.get(key)
            if not stack:
                continue  # an end whose begin is before the capture
            begin_ts, begin = stack.pop()
            _add(columns, planes, threads, begin, begin_ts, ts - begin_ts, base_us, event)
            continue
        _add(columns, planes, threads, event, ts, _number(event.get("dur")) or 0.0, base_us)
    frame = events_frame(columns, host or host_from_filename(Path(path)))
    frame.attrs["devices"] = _devices(frame, others.get("deviceProperties"))
    # Kineto times events from ``baseTimeNanoseconds`` (epoch): what places another log's
    # wall-clock times (a TORCH_TRACE compile) on this trace's clock.
    base = others.get("baseTimeNanoseconds")
    if isinstance(base, int) and not isinstance(base, bool) and 0 <= base < 2**62:
        frame.attrs["epoch_offset_ns"] = base
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


def _add(
    columns: Columns,
    planes: dict[Any, str],
    threads: dict[tuple[Any, Any], str],
    event: dict[str, Any],
    ts: float,
    duration_us: float,
    base_us: int,
    end: dict[str, Any] | None = None,
) -> None:
    pid, tid = _key(event.get("pid")), _key(event.get("tid"))
    plane = planes.get(pid, str(pid))
    line = threads.get((pid, tid))
    if not line:
        line = f"stream {tid}" if plane.startswith("/device:") else str(tid)
    args = dict(_args(event))
    if end is not None:
        args.update(_args(end))
    if event.get("cat") is not None:
        args["cat"] = event["cat"]
    if "cat" in args and not isinstance(args["cat"], str):
        args["cat"] = json.dumps(args["cat"], default=str)  # a damaged trace: keep it as text
    name = str(event.get("name") or (end or {}).get("name") or "")
    step = _PROFILER_STEP.fullmatch(name)
    if step is not None and not plane.startswith("/device:"):
        args["step_num"] = int(step.group(1))
    # ts - base_us is exact in floating point (both are close): then scale to picoseconds.
    start_ps, duration_ps = (ts - base_us) * 1e6, duration_us * 1e6
    if not (abs(start_ps) < _MAX_PS and abs(duration_ps) < _MAX_PS):
        columns.dropped += 1  # a damaged timestamp (1e308, 2^64): not an event we can place
        return
    columns.plane.append(plane)
    columns.line.append(line)
    columns.names.append(name)
    columns.start.append(round(start_ps))
    columns.duration.append(max(round(duration_ps), 0))
    columns.args.append(args or None)
    columns.meta.append(0)
