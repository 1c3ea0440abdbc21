"""The lazy-tensor wrapper: one profiling ``Session`` per process, writing one run directory.

A session wraps ``torch_xla.sync`` (which ``xm.mark_step``, ``MpDeviceLoader`` and
``xp.StepTrace`` all call), so every step boundary is seen without changing user code. At each
boundary it reads the runtime's cumulative metrics and counters (a few microseconds) and appends
the step's deltas to ``steps.jsonl``. PT_XLA_DEBUG analysis and the fallback tracker are switched
on by setting their environment variables before the first graph runs, pointing them at files in
the run directory; each step records how far those files had grown, which later ties each
compilation to its step.

Only this module and ``annotate`` import torch_xla, and only when a session starts.
"""

from __future__ import annotations

import atexit
import json
import os
import platform
import signal
import socket
import sys
import time
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any

from xlaprof import annotate
from xlaprof.analyze.data import StepRow
from xlaprof.atomic import atomic_write_text
from xlaprof.errors import RuntimeUnavailable
from xlaprof.run import (
    DEBUG_LOG,
    EVENTS,
    FALLBACK_LOG,
    FINAL_METRICS,
    GRAPH_INDEX,
    GRAPHS_DIR,
    METRICS_DIR,
    REGIONS,
    SAMPLES,
    STEPS,
    Run,
    RunInfo,
    write_info,
)

# metric name -> (count field, seconds field) of StepRow; time accumulators are nanoseconds.
_TIME_METRICS = {
    "CompileTime": ("compiles", "compile_s"),
    "ExecuteTime": ("executions", "execute_s"),
    "TransferToDeviceTime": ("transfers_to_device", "to_device_s"),
    "TransferFromDeviceTime": ("transfers_from_device", "from_device_s"),
    "LazyTracing": (None, "tracing_s"),
}
_GRAPH_SIZE = "TensorsGraphSize"
_ENV_PREFIXES = ("XLA_", "PJRT_", "PT_XLA_", "TPU_", "LIBTPU_", "XLAPROF_")
DEFAULT_DEBUG_LEVEL = 2
# Graph capture bounds: at most this many graphs, each at most this large (HLO text).
MAX_GRAPHS = 64
MAX_GRAPH_BYTES = 64 * 1024**2
_DUMP_DIR = ".xla_dump"
DEFAULT_SAMPLE_HZ = 100.0


def _import_runtime() -> tuple[Any, Any]:
    try:
        import torch_xla
    except ImportError as error:
        raise RuntimeUnavailable(
            f"torch_xla cannot be imported here ({error}); install xlaprof[runtime] to "
            "profile, or analyze a run captured elsewhere"
        ) from None
    return torch_xla, torch_xla._XLAC


class HostSampler:
    """Where the main thread burns CPU, by the user's source line, ~``hz`` times a second.

    Each tick reads the main thread's CPU clock and charges the CPU time used since the last
    tick to the innermost frame of the user's own code (or ``LIBRARY`` when no user frame is on
    the stack). Time the thread spends blocked (waiting for the device in a sync or ``.item()``)
    uses no CPU, so it is charged nothing: the result says where host work goes, not where the
    host waits.
    """

    LIBRARY = "<library>"

    def __init__(self, hz: float) -> None:
        import threading

        self.interval = 1.0 / hz
        self.thread_id = threading.main_thread().ident
        try:
            self.clock: int | None = time.pthread_getcpuclockid(self.thread_id or 0)
        except (AttributeError, OSError):
            self.clock = None  # no per-thread CPU clock here: charge wall intervals instead
        self.lock = threading.Lock()
        self.seconds: dict[str, float] = defaultdict(float)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="xlaprof-sampler", daemon=True)
        self.cache: dict[str, bool] = {}

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()

    def take(self) -> dict[str, float]:
        with self.lock:
            seconds, self.seconds = dict(self.seconds), defaultdict(float)
        return {where: round(value, 6) for where, value in seconds.items() if value > 0}

    def _is_library(self, filename: str) -> bool:
        known = self.cache.get(filename)
        if known is None:
            from xlaprof.analyze.frames import is_library_file

            known = self.cache[filename] = is_library_file(filename)
        return known

    def _now(self) -> float:
        return time.clock_gettime(self.clock) if self.clock is not None else time.perf_counter()

    def _loop(self) -> None:
        last = self._now()
        while not self.stop_event.wait(self.interval):
            now = self._now()
            used, last = now - last, now
            frame = sys._current_frames().get(self.thread_id)
            where = self.LIBRARY
            while frame is not None:
                code = frame.f_code
                if not self._is_library(code.co_filename):
                    where = f"{code.co_filename}:{frame.f_lineno}"
                    break
                frame = frame.f_back
            del frame
            with self.lock:
                self.seconds[where] += used


class Session:
    """Profiles this process into ``<out>/<host>-<pid>/``. Start with ``start()``."""

    def __init__(
        self,
        out: str | os.PathLike[str],
        *,
        trace_steps: tuple[int, int] | None = None,
        max_steps: int | None = None,
        debug_level: int = DEFAULT_DEBUG_LEVEL,
        exit_on_max_steps: bool = False,
        command: list[str] | None = None,
        sample_hz: float = DEFAULT_SAMPLE_HZ,
        server_port: int | None = None,
        graphs: bool = True,
    ) -> None:
        if trace_steps is not None and not 0 <= trace_steps[0] < trace_steps[1]:
            raise ValueError(f"trace_steps must be (a, b) with 0 <= a < b, not {trace_steps}")
        self.out = Path(out)
        self.trace_steps = trace_steps
        self.max_steps = max_steps
        self.debug_level = debug_level
        self.exit_on_max_steps = exit_on_max_steps
        self.command = command if command is not None else list(sys.argv)
        self.sampler = HostSampler(sample_hz) if sample_hz > 0 else None
        self.server_port = server_port
        self._server: Any = None
        self.graphs = graphs
        self.graphs_kept = 0
        self.info_warnings: list[str] = []  # found before run.json exists
        self.pid = os.getpid()
        self.directory = Path()
        self.info = RunInfo()
        self.finished = False
        self.recording = False
        self.step_index = 0
        self.user_steps = False
        self.user_label: int | None = None
        self.step_start = 0.0
        self.step_start_wall = 0.0
        self.step_cpu_start = 0.0
        self.regions: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        self.tracing = False
        self.exception: str | None = None
        self._xlac: Any = None
        self._torch_xla: Any = None
        self._original_sync: Any = None
        self._previous: dict[str, tuple[int, float]] = {}
        self._previous_aten: dict[str, int] = {}
        self._previous_ops = 0
        self._steps_file: Any = None
        self._regions_file: Any = None
        self._samples_file: Any = None
        self._previous_sigterm: Any = None

    # -- start -----------------------------------------------------------------------------
    def start(self, install_exit_handlers: bool = False) -> Session:
        torch_xla, xlac = _import_runtime()
        self._torch_xla, self._xlac = torch_xla, xlac
        self.directory = _unique_directory(self.out)
        self._enable_debug_output()
        graphs_before = self._metric("CompileTime")[0] + self._metric("ExecuteTime")[0]
        self.info = RunInfo(
            xlaprof_version=_version("xlaprof"),
            torch_version=_module_version("torch"),
            torch_xla_version=getattr(torch_xla, "__version__", None),
            python_version=platform.python_version(),
            cxx11_abi=_cxx11_abi(),
            env={k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)},
            command=self.command,
            cwd=os.getcwd(),
            host=socket.gethostname(),
            pid=self.pid,
            started=time.time(),
            trace_steps=list(self.trace_steps) if self.trace_steps else None,
            debug_level=self.debug_level,
        )
        self.info.warnings.extend(self.info_warnings)
        if graphs_before:
            self.info.warnings.append(
                f"{graphs_before} graphs ran before profiling started: PT_XLA_DEBUG analysis "
                "may be missing (start xlaprof.profile() before the first step, or use "
                "`xlaprof run`)"
            )
        write_info(self.directory, self.info)
        self._steps_file = (self.directory / STEPS).open("a", buffering=1)
        self._regions_file = (self.directory / REGIONS).open("a", buffering=1)
        self._samples_file = (self.directory / SAMPLES).open("a", buffering=1)
        if self.server_port is not None:
            import torch_xla.debug.profiler as xp

            self._server = xp.start_server(self.server_port)
        self._snapshot()
        self._install_sync_hook()
        annotate.set_session(self)
        os.register_at_fork(after_in_child=self._forked)
        if install_exit_handlers:
            atexit.register(self._at_exit)
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
            self._previous_excepthook = sys.excepthook
            sys.excepthook = self._excepthook
        self.recording = True
        if self.sampler is not None:
            self.sampler.start()
        self.step_start = time.perf_counter()
        self.step_start_wall = time.time()
        self.step_cpu_start = time.thread_time()
        if self.trace_steps and self.trace_steps[0] == 0:
            self._start_trace()
        return self

    def _enable_debug_output(self) -> None:
        # torch_xla reads these when its first graph is built, not at import.
        if self.debug_level > 0:
            level = max(self.debug_level, int(os.environ.get("PT_XLA_DEBUG_LEVEL", "0") or 0))
            os.environ["PT_XLA_DEBUG_LEVEL"] = str(level)
            os.environ["PT_XLA_DEBUG_FILE"] = str(self.directory / DEBUG_LOG)
        os.environ["XLA_FNTRACKER_FILE"] = str(self.directory / FALLBACK_LOG)
        if self.graphs:
            # Each compiled module's HLO text. Its source file:line metadata needs XLA_IR_DEBUG
            # and XLA_HLO_DEBUG, which torch_xla reads at import: `xlaprof run` sets them.
            if os.environ.get("XLA_HLO_DEBUG") != "1" or os.environ.get("XLA_IR_DEBUG") != "1":
                self.info_warnings.append(
                    "graphs have no source lines: set XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1 before "
                    "importing torch_xla (xlaprof run does)"
                )
            dump = self.directory / _DUMP_DIR
            flags = os.environ.get("XLA_FLAGS", "")
            os.environ["XLA_FLAGS"] = f"{flags} --xla_dump_to={dump} --xla_dump_hlo_as_text".strip()

    def _install_sync_hook(self) -> None:
        torch_xla = self._torch_xla
        original = torch_xla.sync
        if getattr(original, "_xlaprof_session", None) is not None:
            original = original._xlaprof_original
        self._original_sync = original
        session = self

        def sync(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if session.recording and not session.user_steps and os.getpid() == session.pid:
                session.boundary()
            return result

        sync._xlaprof_session = self  # type: ignore[attr-defined]
        sync._xlaprof_original = original  # type: ignore[attr-defined]
        sync.__doc__ = original.__doc__
        torch_xla.sync = sync
        inner = sys.modules.get("torch_xla.torch_xla")
        if inner is not None and getattr(inner, "sync", None) is original:
            inner.sync = sync

    def _uninstall_sync_hook(self) -> None:
        torch_xla = self._torch_xla
        if torch_xla is None or self._original_sync is None:
            return
        if getattr(torch_xla.sync, "_xlaprof_session", None) is self:
            torch_xla.sync = self._original_sync
            inner = sys.modules.get("torch_xla.torch_xla")
            if inner is not None and getattr(inner.sync, "_xlaprof_session", None) is self:
                inner.sync = self._original_sync

    # -- metrics ---------------------------------------------------------------------------
    def _metric(self, name: str) -> tuple[int, float]:
        data = self._xlac._xla_metric_data(name)
        if data is None:
            return 0, 0.0
        return int(data[0]), float(data[1])

    def _op_counters(self) -> tuple[dict[str, int], int]:
        """``aten::`` counters (CPU fallbacks), and the total of ``xla::`` (lowered op) calls."""
        aten, lowered = {}, 0
        for name in self._xlac._xla_counter_names():
            if name.startswith("aten::"):
                aten[name] = int(self._xlac._xla_counter_value(name) or 0)
            elif name.startswith("xla::"):
                lowered += int(self._xlac._xla_counter_value(name) or 0)
        return aten, lowered

    def _snapshot(self) -> None:
        for name in (*_TIME_METRICS, _GRAPH_SIZE):
            self._previous[name] = self._metric(name)
        self._previous_aten, self._previous_ops = self._op_counters()

    # -- steps -----------------------------------------------------------------------------
    def begin_user_step(self, number: int) -> None:
        """Called by ``xlaprof.step``: from now on steps end at step exits, not at syncs."""
        if not self.user_steps:
            self.user_steps = True
        self.user_label = number

    def end_user_step(self, number: int) -> None:
        if self.recording and os.getpid() == self.pid:
            self.boundary()

    def record_region(self, name: str, seconds: float) -> None:
        entry = self.regions[name]
        entry[0] += 1
        entry[1] += seconds

    def boundary(self) -> None:
        """End the current step: write its row, then handle the trace window and max steps."""
        now = time.perf_counter()
        cpu_now = time.thread_time()
        row = StepRow(
            step=self.user_label if self.user_label is not None else self.step_index,
            start=self.step_start_wall,
            wall_s=now - self.step_start,
            host_cpu_s=cpu_now - self.step_cpu_start,
        )
        for name, (count_field, seconds_field) in _TIME_METRICS.items():
            samples, accumulator = self._metric(name)
            before_samples, before_accumulator = self._previous.get(name, (0, 0.0))
            if count_field is not None:
                setattr(row, count_field, samples - before_samples)
            setattr(row, seconds_field, (accumulator - before_accumulator) / 1e9)
            self._previous[name] = (samples, accumulator)
        samples, accumulator = self._metric(_GRAPH_SIZE)
        before_samples, before_accumulator = self._previous.get(_GRAPH_SIZE, (0, 0.0))
        if samples > before_samples:
            row.graph_nodes = (accumulator - before_accumulator) / (samples - before_samples)
        self._previous[_GRAPH_SIZE] = (samples, accumulator)
        aten, lowered = self._op_counters()
        row.ops = lowered - self._previous_ops
        self._previous_ops = lowered
        row.aten = {
            k: v - self._previous_aten.get(k, 0)
            for k, v in aten.items()
            if v != self._previous_aten.get(k, 0)
        }
        self._previous_aten = aten
        if row.compiles and self.graphs:
            self._collect_graphs(row.step)
        row.debug_offset = _size(self.directory / DEBUG_LOG)
        row.fallback_offset = _size(self.directory / FALLBACK_LOG)
        self._steps_file.write(json.dumps(asdict(row)) + "\n")
        for name, (calls, seconds) in self.regions.items():
            self._regions_file.write(
                json.dumps({"step": row.step, "name": name, "calls": calls, "seconds": seconds})
                + "\n"
            )
        self.regions.clear()
        if self.sampler is not None:
            counts = self.sampler.take()
            if counts:
                self._samples_file.write(json.dumps({"step": row.step, "samples": counts}) + "\n")
        self.step_index += 1
        self.info.steps_recorded = self.step_index
        self.user_label = None
        if self.trace_steps is not None:
            if self.step_index == self.trace_steps[0] and not self.tracing:
                self._start_trace()
            elif self.step_index == self.trace_steps[1] and self.tracing:
                self._stop_trace()
        if self.max_steps is not None and self.step_index >= self.max_steps:
            self.finish("max_steps", detail=f"stopped after {self.step_index} steps")
            if self.exit_on_max_steps:
                raise SystemExit(0)
        self.step_start = time.perf_counter()
        self.step_start_wall = time.time()
        self.step_cpu_start = time.thread_time()

    # -- traces ----------------------------------------------------------------------------
    def _start_trace(self) -> None:
        import torch_xla.debug.profiler as xp

        try:
            xp.start_trace(str(self.directory))
            self.tracing = True
        except RuntimeError as error:
            self.info.warnings.append(f"trace not started: {error}")

    def _stop_trace(self, wait: bool = True) -> None:
        import torch_xla.core.xla_model as xm
        import torch_xla.debug.profiler as xp

        if wait:
            # Stop only once the window's device work is done, or the trace comes back empty.
            xm.wait_device_ops()
        try:
            xp.stop_trace()
        except RuntimeError as error:
            self.info.warnings.append(f"trace not stopped cleanly: {error}")
        self.tracing = False

    # -- finish ----------------------------------------------------------------------------
    def finish(
        self, status: str = "ok", exit_code: int | None = None, detail: str | None = None
    ) -> None:
        """Write the final files. Safe to call more than once; only the first call counts."""
        if self.finished or os.getpid() != self.pid:
            return
        self.finished = True
        self.recording = False
        annotate.set_session(None)
        if self.sampler is not None:
            self.sampler.stop()
        if self.tracing:
            self._stop_trace(wait=status in ("ok", "max_steps"))
        self._uninstall_sync_hook()
        metrics = self.directory / METRICS_DIR
        metrics.mkdir(exist_ok=True)
        try:
            import torch_xla.debug.metrics as met

            atomic_write_text(metrics / FINAL_METRICS, met.metrics_report())
        except Exception as error:
            self.info.warnings.append(f"no final metrics report: {error}")
        if self.graphs:
            self._collect_graphs(self.step_index, final=True)
        from xlaprof.run import Run

        run = Run(self.directory, self.info)  # one snapshot: debug.log is parsed once
        self._write_events(run)
        if self.graphs:
            self._describe_graphs(run)
        for handle in (self._steps_file, self._regions_file, self._samples_file):
            if handle is not None:
                handle.close()
        self._describe_device()
        self.info.ended = time.time()
        self.info.status = status
        self.info.exit_code = exit_code
        self.info.detail = detail if detail is not None else self.exception
        self.info.debug_analysis = _size(self.directory / DEBUG_LOG) > 0
        write_info(self.directory, self.info)

    def _collect_graphs(self, step: int, final: bool = False) -> None:
        """Keep each new module's pre-optimization HLO (gzipped); drop the rest of the dump."""
        import gzip
        import shutil

        dump = self.directory / _DUMP_DIR
        if not dump.is_dir():
            return
        graphs = self.directory / GRAPHS_DIR
        graphs.mkdir(exist_ok=True)
        with (graphs / GRAPH_INDEX).open("a") as index:
            for path in sorted(dump.glob("module_*.before_optimizations.txt")):
                order, _, rest = path.name.partition(".")
                module = rest.removesuffix(".before_optimizations.txt")
                size = path.stat().st_size
                record = {
                    "order": int(order.removeprefix("module_")),
                    "module": module,
                    "step": step,
                    "bytes": size,
                    "file": None,
                }
                if self.graphs_kept >= MAX_GRAPHS:
                    record["skipped"] = f"more than {MAX_GRAPHS} graphs"
                elif size > MAX_GRAPH_BYTES:
                    record["skipped"] = f"larger than {MAX_GRAPH_BYTES} bytes"
                else:
                    name = f"{path.name.removesuffix('.before_optimizations.txt')}.hlo.txt.gz"
                    with path.open("rb") as source, gzip.open(graphs / name, "wb") as target:
                        shutil.copyfileobj(source, target)
                    record["file"] = name
                    self.graphs_kept += 1
                index.write(json.dumps(record) + "\n")
                path.unlink()
        for path in dump.iterdir():  # LLVM IR, objects, reports: not needed, often large
            if path.is_file() and not path.name.endswith(".before_optimizations.txt"):
                path.unlink()
        if final:
            shutil.rmtree(dump, ignore_errors=True)

    def _describe_graphs(self, run: Run) -> None:
        """Add each kept graph's hash, op count and parameter shapes to graphs/index.jsonl."""
        from xlaprof.analyze.data import link_graphs

        entries = sorted(run.graph_index(), key=lambda e: e.get("order", 0))
        graphs = run.graphs()
        if not entries or len(entries) != len(graphs):
            return
        link_graphs(graphs, run.debug_log().compilations())
        for entry, graph in zip(entries, graphs, strict=True):
            entry["graph_hash"] = graph.graph_hash
            if graph.hlo is not None:
                entry["op_count"] = graph.hlo.op_count
                entry["parameters"] = [p.shape for p in graph.hlo.parameters]
        lines = "".join(json.dumps(entry) + "\n" for entry in entries)
        atomic_write_text(self.directory / GRAPHS_DIR / GRAPH_INDEX, lines)

    def _write_events(self, run: Run) -> None:
        from xlaprof.report.json_out import event_json

        lines = [json.dumps(event_json(event)) for event in run.debug_log().events]
        atomic_write_text(self.directory / EVENTS, "".join(line + "\n" for line in lines))

    def _describe_device(self) -> None:
        if self.step_index == 0:
            return  # Asking would start the runtime in a process that never used it.
        try:
            import torch_xla.runtime as xr

            self.info.device_kind = xr.device_type()
            self.info.device_count = xr.global_runtime_device_count()
            self.info.rank = xr.global_ordinal()
            self.info.device_memory = _device_memory()
        except Exception as error:
            self.info.warnings.append(f"device not described: {error}")

    # -- process exit paths (xlaprof run) --------------------------------------------------
    def _excepthook(self, kind: type[BaseException], value: BaseException, tb: Any) -> None:
        self.exception = f"{kind.__name__}: {value}"
        status = "interrupted" if issubclass(kind, KeyboardInterrupt) else "exception"
        self.finish(status, exit_code=1)
        self._previous_excepthook(kind, value, tb)

    def _at_exit(self) -> None:
        self.finish("ok")

    def _on_sigterm(self, signum: int, _frame: Any) -> None:
        detail = f"stopped by {signal.strsignal(signum)}"
        self.finish("signal", exit_code=128 + signum, detail=detail)
        previous = self._previous_sigterm
        if callable(previous):
            previous(signum, _frame)
            return
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def _forked(self) -> None:
        # A forked child (a DataLoader worker) must not write into its parent's run.
        self.sampler = None  # its thread did not survive the fork
        self.recording = False
        self.finished = True
        annotate.set_session(None)


def _device_memory() -> dict[str, int] | None:
    """Device memory in use and its limit (TPU HBM); None where the backend does not say."""
    try:
        import torch_xla.core.xla_model as xm

        info = xm.get_memory_info()
    except Exception:
        return None
    used, limit = info.get("bytes_used"), info.get("bytes_limit")
    if not used or not limit:
        return None
    memory = {"bytes_used": int(used), "bytes_limit": int(limit)}
    if info.get("peak_bytes_used"):
        memory["peak_bytes_used"] = int(info["peak_bytes_used"])
    return memory


def _unique_directory(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    base = f"{socket.gethostname()}-{os.getpid()}"
    for suffix in range(1000):
        candidate = out / (base if suffix == 0 else f"{base}-{suffix}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise RuntimeError(f"no free run directory name under {out}")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _version(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def _module_version(name: str) -> str | None:
    module = sys.modules.get(name)
    return getattr(module, "__version__", None) if module is not None else None


def _cxx11_abi() -> bool | None:
    torch = sys.modules.get("torch")
    try:
        return bool(torch._C._GLIBCXX_USE_CXX11_ABI) if torch is not None else None
    except AttributeError:
        return None
