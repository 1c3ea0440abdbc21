"""The lazy-tensor wrapper: one profiling ``Session`` per process, writing one run directory.

A session wraps ``torch_xla.sync`` (``synchook``), so every step boundary is seen without
changing user code. At each boundary it reads the runtime's cumulative metrics (``metrics``),
keeps them for the step's row in ``steps.jsonl`` (built with the next flush), and moves new HLO
dumps into ``graphs/`` (``graphs``). PT_XLA_DEBUG analysis and the fallback tracker are switched
on by setting their environment variables before the first graph runs, pointing them at files in
the run directory; each step records how far those files had grown, which later ties each
compilation to its step.
Dynamo's recompile reasons and graph breaks go to ``dynamo.jsonl`` (``dynamo``), and the first
step's module calls to ``modules.json`` (``modules``), for the analyzers that name layer stacks.

What runs at every step is kept small (``benchmarks/overhead.py`` measures each part): a few
metric reads, two log sizes and the raw values kept in memory (the rows are built and reach
the disk about once a second, in a batch); IR debug (per-op Python stacks, for the graphs' source
lines) runs only while compilations happen (``SourceFrames``).
Nothing here raises into the training script: an error in a step boundary, the sampler or the
trace window is recorded in ``run.json``'s warnings and profiling stops (or that part does),
while the job goes on.

This package is what the training process loads: it imports none of the later stages (model,
tables, analyzers, report), pandas or plotly. torch_xla is imported only when a session starts.

The session's jobs live in modules of their own (what it sets up as it starts in ``setup``, its
row files in ``rows``, the sampler, the recorders, the trace window); this one is the lifecycle
they share one state in: start, step boundary, finish and the process's exit paths.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xlaprof.capture import annotate, probe
from xlaprof.capture.dynamo import DynamoRecorder
from xlaprof.capture.graphs import GraphHarvester, SourceFrames
from xlaprof.capture.metrics import StepMetrics
from xlaprof.capture.modules import ModuleRecorder
from xlaprof.capture.rows import (
    FLUSH_SECONDS,
    MAX_FILE_ENV,
    EndedStep,
    LogSize,
    RowBuffer,
    StepRows,
    file_limit,
)
from xlaprof.capture.sampler import DEFAULT_SAMPLE_HZ, HostSampler
from xlaprof.capture.setup import (
    enable_debug_output,
    import_runtime,
    restore_environment,
    run_info,
    saved_environment,
    unique_directory,
)
from xlaprof.capture.synchook import install_sync_hook, uninstall_sync_hook
from xlaprof.capture.tracewindow import TraceWindow
from xlaprof.parse.frames import is_library_file
from xlaprof.rundir.schema import (
    DEBUG_LOG,
    FALLBACK_LOG,
    FINAL_METRICS,
    METRICS_DIR,
    MODULES,
    REGIONS,
    SAMPLES,
    STEPS,
    RunInfo,
)
from xlaprof.rundir.writer import atomic_write_text, write_info

log = logging.getLogger(__name__)

DEFAULT_DEBUG_LEVEL = 2
# Sessions started in this process: torch_xla reads the debug-file and dump settings when its
# first graph runs, so a later session cannot point them at its own run directory.
_STARTED = {"sessions": 0}


@dataclass(frozen=True)
class SessionOptions:
    """What a session records, and when it stops."""

    trace_steps: tuple[int, int] | None = None  # an xplane trace of steps a..b-1
    max_steps: int | None = None  # recording stops after this many steps
    debug_level: int = DEFAULT_DEBUG_LEVEL  # PT_XLA_DEBUG_LEVEL (0: no debug analysis)
    exit_on_max_steps: bool = False  # the job exits at max_steps (xlaprof run)
    command: list[str] | None = None  # the job's command line (default: sys.argv)
    sample_hz: float = DEFAULT_SAMPLE_HZ  # the host sampler's rate (0: off)
    server_port: int | None = None  # a profiler server for ``xlaprof capture``
    graphs: bool = True  # keep each compiled graph's HLO
    source_frames: str = "auto"  # when IR debug records source lines (``SourceFrames``)


class Session:
    """Profiles this process into ``<out>/<host>-<pid>/``. Start with ``start()``."""

    def __init__(self, out: str | os.PathLike[str], options: SessionOptions | None = None) -> None:
        options = options or SessionOptions()
        trace_steps = options.trace_steps
        if trace_steps is not None and not 0 <= trace_steps[0] < trace_steps[1]:
            raise ValueError(f"trace_steps must be (a, b) with 0 <= a < b, not {trace_steps}")
        self.out = Path(out)
        self.trace_steps = trace_steps
        self.max_steps = options.max_steps
        self.debug_level = options.debug_level
        self.exit_on_max_steps = options.exit_on_max_steps
        self.command = options.command if options.command is not None else list(sys.argv)
        sample_hz = options.sample_hz
        self.sampler = HostSampler(sample_hz, self._step_label) if sample_hz > 0 else None
        self.server_port = options.server_port
        self._server: Any = None
        self.graphs = options.graphs
        self.source_frames = options.source_frames
        self.harvester: GraphHarvester | None = None
        self.frames: SourceFrames | None = None
        # Guards the regions dict and the step state against another thread's region or a
        # signal handler's finish() arriving mid-boundary (reentrant: same thread).
        self.lock = threading.RLock()
        self.info_warnings: list[str] = []  # found before run.json exists
        self.pid = os.getpid()
        self.directory = Path()
        self.info = RunInfo()
        self.finished = False
        self.recording = False
        self.step_index = 0
        self._info_written = 0.0  # monotonic time run.json was last rewritten mid-run
        self.user_steps = False
        self.user_label: int | None = None
        self.step_start = 0.0
        self.step_start_wall = 0.0
        self.step_cpu_start = 0.0
        self.regions: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        self.window: TraceWindow | None = None
        self.exception: str | None = None
        self._torch_xla: Any = None
        self._original_sync: Any = None
        self.metrics: StepMetrics | None = None
        self.rows: StepRows | None = None  # with the steps ended since the last flush
        self._previous_sigterm: Any = None
        self.dynamo: DynamoRecorder | None = None
        self.modules: ModuleRecorder | None = None
        self._debug_log = LogSize(None)
        self._fallback_log = LogSize(None)
        self._fallback_seen = -1  # the fallback log's size at the last boundary
        self._env_before: dict[str, str | None] = {}  # what start() found, finish() puts back

    # -- start -----------------------------------------------------------------------------
    def start(self, install_exit_handlers: bool = False) -> Session:
        torch_xla, xlac = import_runtime()
        self._torch_xla = torch_xla
        self.metrics = StepMetrics(xlac)
        self.directory = unique_directory(self.out)
        self._env_before = saved_environment()
        if _STARTED["sessions"]:
            self.info_warnings.append(
                "a second profiling session in this process: torch_xla read PT_XLA_DEBUG_FILE, "
                "XLA_FNTRACKER_FILE and the HLO dump folder when the first session's graphs ran, "
                "so this run has per-step metrics, regions and samples but no debug analysis, "
                "fallback records or graphs (use one profile() per process, or xlaprof run)"
            )
        else:
            output = enable_debug_output(
                self.directory, xlac, self.debug_level, self.graphs, self.source_frames
            )
            self._debug_log, self._fallback_log = output.debug_log, output.fallback_log
            self.frames, self.harvester = output.frames, output.harvester
            self.info_warnings.extend(output.warnings)
        _STARTED["sessions"] += 1
        graphs_before = (
            self.metrics.metric("CompileTime")[0] + self.metrics.metric("ExecuteTime")[0]
        )
        self.info = run_info(self.command, self.pid, self.trace_steps, self.debug_level, torch_xla)
        self.info.warnings.extend(self.info_warnings)
        self.window = TraceWindow(self.directory, self.info.warnings)
        if graphs_before:
            self.info.warnings.append(
                f"{graphs_before} graphs ran before profiling started: PT_XLA_DEBUG analysis "
                "may be missing (start xlaprof.profile() before the first step, or use "
                "`xlaprof run`)"
            )
        write_info(self.directory, self.info)
        # Each per-step file is capped: see _note_dropped.
        self.rows = StepRows(self.directory, self.metrics, file_limit())
        if self.server_port is not None:
            import torch_xla.debug.profiler as xp

            self._server = xp.start_server(self.server_port)
        self.metrics.snapshot()
        self._original_sync = install_sync_hook(torch_xla, self)
        self._start_recorders()
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
            self.window.start()
        return self

    def _start_recorders(self) -> None:
        """Dynamo's recompile reasons for the whole run; module calls for the first step."""
        self.dynamo = DynamoRecorder(self.directory, lambda: self.step_index, is_library_file)
        warning = self.dynamo.start()
        if warning:
            self.info.warnings.append(warning)
        self.dynamo.on_compile_start = self._dynamo_compiling

    def _start_module_recorder(self) -> None:
        """Record the second step's module calls, unless dynamo is in use.

        A global forward hook is a guard input for dynamo: present while ``torch.compile``
        compiles, it would make dynamo compile again once removed (and torch.compile warns).
        So it is installed only after a first step in which dynamo compiled nothing, and
        dropped unused as soon as dynamo starts compiling.
        """
        if self.dynamo is not None and self.dynamo.compiles:
            return
        recorder = ModuleRecorder(is_library_file)
        try:
            recorder.start()
        except Exception as error:
            self.info.warnings.append(f"module calls not recorded: {error}")
            return
        self.modules = recorder

    def _dynamo_compiling(self) -> None:
        if self.modules is not None:
            self.modules.stop()
            self.modules = None

    def _write_modules(self, step: int | None = None) -> None:
        recorder, self.modules = self.modules, None
        if recorder is None:
            return
        recorder.stop()
        try:
            summary = recorder.summary()
            summary["step"] = step
            atomic_write_text(self.directory / MODULES, json.dumps(summary))
        except Exception as error:
            self.info.warnings.append(f"module calls not recorded: {error}")

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
        with self.lock:
            entry = self.regions[name]
            entry[0] += 1
            entry[1] += seconds

    def boundary(self, graph_required: bool = False, sync_entered_cpu: float | None = None) -> None:
        """End the current step: write its row, then handle the trace window and max steps.

        Outside ``xlaprof.step`` marks, a sync that ran no graph ends no step (its time goes to
        the next one): nothing traced since the last step, or, with ``graph_required``, no
        graph built (``MpDeviceLoader``'s syncs, see ``synchook``). ``sync_entered_cpu`` is the
        thread's CPU clock when the sync that ends the step was entered (the sync hook's).

        Never raises into the training script, except the ``SystemExit`` that ``max_steps``
        asks for under ``xlaprof run``: an error stops profiling and is recorded in the run.
        """
        # The clocks first: the step's host CPU must not hold the boundary's own reads.
        now, cpu_now = time.perf_counter(), time.thread_time()
        try:
            with self.lock:
                if not self.recording:
                    return
                assert self.metrics is not None
                if not self.user_steps and self.metrics.idle(graph_required):
                    return
                done = self._boundary(now, cpu_now, sync_entered_cpu)
        except Exception as error:
            self._degrade("a step boundary", error)
            return
        if done:
            self.finish("max_steps", detail=f"stopped after {self.step_index} steps")
            if self.exit_on_max_steps:
                raise SystemExit(0)

    def _boundary(self, now: float, cpu_now: float, sync_entered_cpu: float | None) -> bool:
        """End the finished step; True when ``max_steps`` is reached.

        Only what must be read now is read here (clocks, log sizes, the runtime's metrics);
        its row is built later (``StepRows.build``), with the other steps kept since the last
        flush (see ``StepMetrics``). ``now`` and ``cpu_now`` are the wall and thread CPU clocks
        read as ``boundary`` was entered; ``sync_entered_cpu`` is the thread CPU clock as the
        sync that ends the step was entered (None without one).
        """
        assert self.metrics is not None and self.rows is not None
        step = self.user_label if self.user_label is not None else self.step_index
        debug_offset = self._debug_log.size()
        fallback_offset = self._fallback_log.size()
        reading, aten, compiles = self.metrics.take(
            fallbacks=not self._fallback_log.tracking or fallback_offset != self._fallback_seen
        )
        self._fallback_seen = fallback_offset
        if self.frames is not None:
            frames_on = self.frames.step(compiles)
            if self.harvester is not None:
                self.harvester.frames_on = frames_on
        if compiles and self.harvester is not None:
            self.harvester.collect(step)
        regions = None
        if self.regions:
            regions, self.regions = self.regions, defaultdict(lambda: [0, 0.0])
        self.rows.ended.append(
            EndedStep(
                step,
                self.step_start_wall,
                now - self.step_start,
                cpu_now - self.step_cpu_start,
                None if sync_entered_cpu is None else cpu_now - sync_entered_cpu,
                debug_offset,
                fallback_offset,
                reading,
                aten,
                regions,
            )
        )
        if self.modules is not None:
            self._write_modules(step)
        elif self.step_index == 0:
            self._start_module_recorder()
        self.step_index += 1
        self.info.steps_recorded = self.step_index
        if time.monotonic() - self._info_written >= FLUSH_SECONDS:
            self._info_written = time.monotonic()
            # A full disk must not stop training; finish() writes run.json again anyway.
            with contextlib.suppress(OSError):
                self._flush_rows()  # rows first: run.json never counts a row not on disk
                write_info(self.directory, self.info, durable=False)
        self.user_label = None
        self._move_trace_window()
        self.step_start = time.perf_counter()
        self.step_start_wall = time.time()
        self.step_cpu_start = time.thread_time()
        return self.max_steps is not None and self.step_index >= self.max_steps

    def _move_trace_window(self) -> None:
        """Start or stop the trace at the steps ``trace_steps`` names, as one step ends."""
        if self.trace_steps is None or self.window is None:
            return
        if self.step_index == self.trace_steps[0] and not self.window.tracing:
            self.window.start()
        elif self.step_index == self.trace_steps[1] and self.window.tracing:
            self.window.stop()

    def _step_label(self) -> int:
        """The number the step in progress will have in ``steps.jsonl`` (read by the sampler)."""
        return self.user_label if self.user_label is not None else self.step_index

    def _flush_rows(self) -> None:
        if self.rows is not None:
            self.rows.flush(self.sampler, self._step_label())
        self._note_dropped()

    def _note_dropped(self) -> None:
        """Record in run.json what the per-step files' caps dropped: rows, or log bytes."""
        files: dict[str, RowBuffer | LogSize] = {}
        if self.rows is not None:
            files = {STEPS: self.rows.steps, REGIONS: self.rows.regions, SAMPLES: self.rows.samples}
        files |= {DEBUG_LOG: self._debug_log, FALLBACK_LOG: self._fallback_log}
        for name, source in files.items():
            dropped = source.dropped
            if not dropped:
                continue
            if name not in self.info.dropped:
                unit = "bytes" if name in (DEBUG_LOG, FALLBACK_LOG) else "rows"
                self.info.warnings.append(
                    f"{name} reached its cap of {file_limit()} bytes by step {self.step_index}: "
                    f"later {unit} are dropped (counted in dropped; ${MAX_FILE_ENV} raises it)"
                )
            self.info.dropped[name] = dropped

    def _degrade(self, where: str, error: BaseException) -> None:
        """Stop profiling after an internal error, keeping what was recorded; never raise."""
        try:
            self.recording = False
            with contextlib.suppress(OSError, ValueError):
                self._flush_rows()
            self.info.warnings.append(
                f"profiling stopped at step {self.step_index}: {where} failed "
                f"({type(error).__name__}: {error}); steps before it are kept"
            )
            if self.sampler is not None:
                self.sampler.stop()
            if self.frames is not None:
                self.frames.close()
        except Exception as again:  # the training job must go on
            log.debug("xlaprof could not record its own error: %s", again)

    # -- finish ----------------------------------------------------------------------------
    def finish(
        self, status: str = "ok", exit_code: int | None = None, detail: str | None = None
    ) -> None:
        """Write the final files. Safe to call more than once; only the first call counts.

        Each part is attempted on its own and a failure becomes a warning in ``run.json``:
        this runs from atexit, signal and exception hooks, where raising would hide the
        script's own outcome.
        """
        with self.lock:
            if self.finished or os.getpid() != self.pid:
                return
            self.finished = True
            self.recording = False
        annotate.set_session(None)
        wait = status in ("ok", "max_steps")
        self._stop_recorders(wait)
        self._attempt("no final metrics report", self._write_final_metrics, wait=wait)
        if self.harvester is not None:
            self._attempt("graphs not collected", self.harvester.collect, self.step_index, True)
        if self.rows is not None:
            self._attempt("step rows not built", self.rows.build)
            for rows in self.rows.files:
                self._attempt("a run file not written", rows.close)
        for log_size in (self._debug_log, self._fallback_log):
            self._attempt("a log not closed", log_size.close)
        self._attempt("events.jsonl not written", self._write_derived)
        self._attempt("device not described", self._describe_device)
        self.info.ended = time.time()
        self.info.status = status
        self.info.exit_code = exit_code
        self.info.detail = detail if detail is not None else self.exception
        self.info.debug_analysis = _size(self.directory / DEBUG_LOG) > 0
        self._attempt("dropped rows not counted", self._note_dropped)
        self._attempt("run.json not written", write_info, self.directory, self.info)
        restore_environment(self._env_before)

    def _stop_recorders(self, wait: bool) -> None:
        """Stop what records while the job runs (the sampler, the module and dynamo recorders,
        IR debug, the trace: waiting for its device work with ``wait``) and the sync hook."""
        if self.sampler is not None:
            self.sampler.stop()
            if self.sampler.error is not None:
                self.info.warnings.append(f"host sampler stopped: {self.sampler.error}")
            if self.rows is not None:
                self._attempt(
                    "host samples not kept",
                    self.rows.take_samples,
                    self.sampler,
                    self._step_label(),
                )
        self._attempt("module calls not written", self._write_modules)
        if self.dynamo is not None:
            self._attempt("dynamo recorder not stopped", self.dynamo.stop)
        if self.frames is not None:
            self._attempt("IR debug not restored", self.frames.close)
        if self.window is not None and self.window.tracing:
            self._attempt("trace not stopped", self.window.stop, wait=wait)
        self._attempt(
            "sync hook not removed",
            uninstall_sync_hook,
            self._torch_xla,
            self,
            self._original_sync,
        )

    def _attempt(self, failure: str, action: Any, *args: Any, **kwargs: Any) -> None:
        """Run one part of ``finish``; its error becomes a warning, never an exception."""
        try:
            action(*args, **kwargs)
        except Exception as error:  # the script's exit must not be disturbed
            self.info.warnings.append(f"{failure}: {type(error).__name__}: {error}")

    def _write_final_metrics(self, wait: bool) -> None:
        """The metrics report at the end, after the graphs still executing have finished.

        Execution is asynchronous: a script whose last step is not read back exits while that
        step's graph still runs, and a report taken then misses its ``ExecuteTime`` sample (one
        execution short, at random). Waiting costs at most that one step; it is skipped on a
        signal or an exception, where the job should end as soon as it can.
        """
        import torch_xla.debug.metrics as met

        if wait and (met.metric_names() or met.counter_names()):  # the runtime was used
            import torch_xla.core.xla_model as xm

            xm.wait_device_ops()
        metrics = self.directory / METRICS_DIR
        metrics.mkdir(exist_ok=True)
        atomic_write_text(metrics / FINAL_METRICS, met.metrics_report())

    def _write_derived(self) -> None:
        from xlaprof.rundir.derive import write_derived
        from xlaprof.rundir.reader import Run

        write_derived(Run(self.directory, self.info), graphs=self.harvester is not None)

    def _describe_device(self) -> None:
        if self.step_index == 0:
            return  # Asking would start the runtime in a process that never used it.
        probe.describe_device(self.info)

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
        for recorder in (self.dynamo, self.modules):
            if recorder is not None:
                recorder.stop()
        self.dynamo = self.modules = None
        self.sampler = None  # its thread did not survive the fork
        if self.rows is not None:
            self.rows.discard()  # the parent's rows: the parent writes them
        self.recording = False
        self.finished = True
        annotate.set_session(None)


def _size(path: str | Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0
