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

This package is what the training process loads: it imports nothing of the analysis stages,
``xlaprof.report``, pandas or plotly. torch_xla is imported only when a session starts.

The session's jobs live in their own modules (sampler, sync hook, metrics, graph capture, trace
window, recorders, row files); this one holds the lifecycle: start, step boundary, finish and
the process's exit paths.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import platform
import signal
import socket
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

from xlaprof.capture import annotate, probe
from xlaprof.capture.dynamo import DynamoRecorder
from xlaprof.capture.eager import EagerSite
from xlaprof.capture.graphcapture import GraphCapture
from xlaprof.capture.metrics import METRICS_SAMPLES, Reading, StepMetrics
from xlaprof.capture.modules import ModuleRecorder
from xlaprof.capture.rows import FLUSH_SECONDS, MAX_FILE_ENV, LogSize, RowBuffer, file_limit
from xlaprof.capture.runqueue import RunQueueClock
from xlaprof.capture.sampler import DEFAULT_SAMPLE_HZ, HostSampler
from xlaprof.capture.synchook import hooked_session, install_sync_hook, uninstall_sync_hook
from xlaprof.capture.tracewindow import TraceWindow
from xlaprof.errors import RuntimeUnavailable
from xlaprof.parse.frames import is_library_file
from xlaprof.rundir.schema import (
    DEBUG_LOG,
    EXECUTIONS,
    FALLBACK_LOG,
    FINAL_METRICS,
    METRICS_DIR,
    MODULES,
    REGIONS,
    SAMPLES,
    STEPS,
    RunInfo,
    StepRow,
)
from xlaprof.rundir.writer import atomic_write_text, write_info

log = logging.getLogger(__name__)

_ENV_PREFIXES = ("XLA_", "PJRT_", "PT_XLA_", "TPU_", "LIBTPU_", "XLAPROF_")
DEFAULT_DEBUG_LEVEL = 2
# Python frames torch_xla prints per compilation or execution (PT_XLA_DEBUG_MAX_FRAME; its own
# default is 8). A sync or host read made inside a library (transformers' mask helpers, Trainer's
# logging, accelerate) sits 17-29 frames below the user's line in examples/realcode: with 8,
# the event has no user frame and its finding no location. 64 leaves room for deeper stacks (a
# model in a wrapper in a trainer). The cost is per event and only where stacks are deeper
# than 8: ~4 us more per execution 40 frames deep, nothing on a shallow loop
# (benchmarks/debug_frames.py).
DEBUG_MAX_FRAMES = 64
# Environment a session sets for torch_xla; restored when the session finishes.
_SESSION_ENV = (
    "PT_XLA_DEBUG_LEVEL",
    "PT_XLA_DEBUG_FILE",
    "PT_XLA_DEBUG_MAX_FRAME",
    "XLA_FNTRACKER_FILE",
    "XLA_FLAGS",
    "XLA_HLO_DEBUG",
    "XLA_METRICS_SAMPLES",
)
# Sessions started in this process: torch_xla reads the debug-file settings when its first graph
# runs, so a later session cannot point them at its own run directory.
_STARTED = {"sessions": 0}


def _import_runtime() -> tuple[Any, Any]:
    try:
        import torch_xla
    except ImportError as error:
        raise RuntimeUnavailable(
            f"torch_xla cannot be imported here ({error}); install xlaprof[runtime] to "
            "profile, or analyze a run captured elsewhere"
        ) from None
    return torch_xla, torch_xla._XLAC


class Session:
    """Profiles this process into ``<out>/<host>-<pid>/``. Start with ``start()``."""

    def __init__(  # noqa: PLR0913 (keyword-only: one per setting of profile() and xlaprof run)
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
        source_frames: str = "auto",
    ) -> None:
        if trace_steps is not None and not 0 <= trace_steps[0] < trace_steps[1]:
            raise ValueError(f"trace_steps must be (a, b) with 0 <= a < b, not {trace_steps}")
        self.out = Path(out)
        self.trace_steps = trace_steps
        self.max_steps = max_steps
        self.debug_level = debug_level
        self.exit_on_max_steps = exit_on_max_steps
        self.command = command if command is not None else list(sys.argv)
        self.sampler = HostSampler(sample_hz, self.step_label) if sample_hz > 0 else None
        self.server_port = server_port
        self._server: Any = None
        self.graphs = graphs
        self.source_frames = source_frames
        # Where the run's graphs come from, and their capture's cost (capture/graphcapture.py).
        self.graph_capture: GraphCapture | None = None
        self.eager_site: EagerSite | None = None
        self.outer: Session | None = None  # the session this one is nested in, if any
        self.loud: list[str] = []  # warnings also printed when the session ends
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
        self._step_trace: Any = None  # the TraceMe over the step in progress (see _open_step)
        self.user_label: int | None = None
        self.step_start = 0.0
        self.step_start_wall = 0.0
        self.step_cpu_start = 0.0
        self._run_queue = RunQueueClock()  # the stepping thread's wait for a CPU
        self.regions: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        self.window: TraceWindow | None = None
        self.exception: str | None = None
        self._torch_xla: Any = None
        self._original_sync: Any = None
        self.metrics: StepMetrics | None = None
        self._steps: RowBuffer | None = None
        self._regions: RowBuffer | None = None
        self._samples: RowBuffer | None = None
        self._executions: RowBuffer | None = None
        self._previous_sigterm: Any = None
        self.dynamo: DynamoRecorder | None = None
        self.modules: ModuleRecorder | None = None
        self._debug_log = LogSize(None)
        self._fallback_log = LogSize(None)
        self._fallback_seen = -1  # the fallback log's size at the last boundary
        # Steps ended since the last flush, as read at their boundaries (see _write_pending).
        self._pending: list[_EndedStep] = []

    # -- start -----------------------------------------------------------------------------
    def start(self, install_exit_handlers: bool = False) -> Session:
        """Start recording: the run directory, torch_xla's debug outputs, the graphs' capture,
        run.json, the sync hook and the recorders; with ``install_exit_handlers`` (``xlaprof
        run``), the exit, signal and exception hooks that finish the run."""
        torch_xla, xlac = _import_runtime()
        self._torch_xla = torch_xla
        self.metrics = StepMetrics(xlac)
        self.directory = _unique_directory(self.out)
        self._env_before = {name: os.environ.get(name) for name in _SESSION_ENV}
        graphs_before = self._choose_outputs(torch_xla, xlac)
        self.info = self._describe_run(torch_xla)
        self.info.warnings.extend(self.info_warnings)
        self.window = TraceWindow(self.directory, self.info.warnings)
        if graphs_before:
            self.info.warnings.append(
                f"{graphs_before} graphs ran before profiling started: PT_XLA_DEBUG analysis "
                "may be missing (start xlaprof.profile() before the first step, or use "
                "`xlaprof run`)"
            )
        write_info(self.directory, self.info)
        limit = file_limit()  # each per-step file is capped: see _note_dropped
        self._steps = RowBuffer(self.directory / STEPS, limit)
        self._regions = RowBuffer(self.directory / REGIONS, limit)
        self._samples = RowBuffer(self.directory / SAMPLES, limit)
        self._executions = RowBuffer(self.directory / EXECUTIONS, limit)
        if self.server_port is not None:
            from xlaprof.capture.runtime import runtime

            self._server = runtime().start_server(self.server_port)
        self.metrics.snapshot()
        self._install(torch_xla, xlac, install_exit_handlers)
        self.recording = True
        if self.sampler is not None:
            self.sampler.start()
        self.step_start = time.perf_counter()
        self.step_start_wall = time.time()
        self.step_cpu_start = time.thread_time()
        self._run_queue.restart()
        if self.trace_steps and self.trace_steps[0] == 0:
            self.window.start()
        self._open_step()
        return self

    def _install(self, torch_xla: Any, xlac: Any, exit_handlers: bool) -> None:
        """The sync hook, the eager-mode watch, the recorders, annotations' session, and the
        fork, exit, signal and exception hooks."""
        self._original_sync = install_sync_hook(torch_xla, self)
        self.eager_site = EagerSite(xlac)
        self.eager_site.start()
        if self.outer is not None:
            self.outer.note_nested(self)
        self._start_recorders()
        annotate.set_session(self)
        os.register_at_fork(after_in_child=self._forked)
        if exit_handlers:
            atexit.register(self._at_exit)
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
            self._previous_excepthook = sys.excepthook
            sys.excepthook = self._excepthook

    def _choose_outputs(self, torch_xla: Any, xlac: Any) -> int:
        """What this session can still switch on in this process (an enclosing session, or an
        earlier one, has torch_xla's debug files already); the graphs that ran before it."""
        assert self.metrics is not None
        outer = hooked_session(torch_xla)
        if outer is not None and outer.recording and outer.pid == self.pid:
            self.outer = outer
            self.info_warnings.append(
                f"nested in the run {outer.directory} (started by xlaprof run or an enclosing "
                "profile()), which records these steps too, with their debug analysis, fallback "
                "records and graphs: this run has per-step metrics, regions and samples only"
            )
        elif _STARTED["sessions"]:
            self.info_warnings.append(
                "a second profiling session in this process: torch_xla read PT_XLA_DEBUG_FILE "
                "and XLA_FNTRACKER_FILE when the first session's graphs ran, so this run has "
                "no debug analysis or fallback records (use one profile() per process, or "
                "xlaprof run)"
            )
        else:
            self._enable_debug_output()
        if self.graphs and self.outer is None:
            self.graph_capture = GraphCapture(
                self.directory, self.metrics, self._warn, self._warn_loud
            )
            self.graph_capture.setup(xlac, self.source_frames)
        _STARTED["sessions"] += 1
        return self.metrics.metric("CompileTime")[0] + self.metrics.metric("ExecuteTime")[0]

    def _describe_run(self, torch_xla: Any) -> RunInfo:
        """The run's description for run.json: versions, command, where and when."""
        return RunInfo(
            xlaprof_version=probe.package_version("xlaprof"),
            torch_version=probe.module_version("torch"),
            torch_xla_version=getattr(torch_xla, "__version__", None),
            python_version=platform.python_version(),
            cxx11_abi=probe.cxx11_abi(),
            env={k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)},
            command=self.command,
            cwd=os.getcwd(),
            host=socket.gethostname(),
            pid=self.pid,
            started=time.time(),
            trace_steps=list(self.trace_steps) if self.trace_steps else None,
            debug_level=self.debug_level,
            graph_source=None if self.graph_capture is None else self.graph_capture.source,
            outer_run=None if self.outer is None else str(self.outer.directory),
        )

    def _open_step(self) -> None:
        """Put a TraceMe over the step now starting, numbered as ``steps.jsonl`` numbers it
        (not after ``xlaprof.step`` marks: those are the steps then). A capture records it only
        if it runs from the step's start to its end, so a capture's partial first and last
        steps carry no number, and every whole step carries the job's."""
        if not self.user_steps:
            self._step_trace = annotate.open_step_trace(self.step_index)

    def _close_step(self) -> None:
        trace, self._step_trace = self._step_trace, None
        if trace is not None:
            annotate.close_step_trace(trace)

    def _start_recorders(self) -> None:
        """Dynamo's recompile reasons for the whole run; module calls for the first step."""
        self.dynamo = DynamoRecorder(self.directory, lambda: self.step_index, is_library_file)
        warning = self.dynamo.start()
        if warning:
            self.info.warnings.append(warning)
        self.dynamo.on_compile_start = self._dynamo_compiling

    def _start_module_recorder(self) -> None:
        """Record the module calls of the first step after the first that runs a forward,
        unless dynamo is in use (``ModuleRecorder.step_ended``).

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

    def _enable_debug_output(self) -> None:
        # torch_xla reads these when its first graph is built, not at import.
        os.environ.setdefault("XLA_METRICS_SAMPLES", METRICS_SAMPLES)
        if self.debug_level > 0:
            level = max(self.debug_level, int(os.environ.get("PT_XLA_DEBUG_LEVEL", "0") or 0))
            os.environ["PT_XLA_DEBUG_LEVEL"] = str(level)
            os.environ["PT_XLA_DEBUG_FILE"] = str(self.directory / DEBUG_LOG)
            # read at the first event, like the level: a user's own setting is kept
            os.environ.setdefault("PT_XLA_DEBUG_MAX_FRAME", str(DEBUG_MAX_FRAMES))
            self._debug_log = LogSize(self.directory / DEBUG_LOG, file_limit())
        os.environ["XLA_FNTRACKER_FILE"] = str(self.directory / FALLBACK_LOG)
        self._fallback_log = LogSize(self.directory / FALLBACK_LOG, file_limit())

    def _warn(self, message: str) -> None:
        """A warning for run.json, said while the run starts or after."""
        if self.info.started is None:
            self.info_warnings.append(message)
        else:
            self.info.warnings.append(message)

    def _warn_loud(self, message: str) -> None:
        """A warning for run.json that is also printed when the session ends."""
        self.loud.append(message)
        self._warn(message)

    def note_nested(self, inner: Session) -> None:
        """An ``xlaprof.profile()`` started inside this session: say so in this run."""
        with self.lock:
            self.info.nested_runs.append(str(inner.directory))
            self.info.warnings.append(
                f"from step {self.step_index} on, an xlaprof.profile() nested in this run also "
                f"profiled the steps, into {inner.directory}; this run kept recording them"
            )

    # -- steps -----------------------------------------------------------------------------
    def begin_user_step(self, number: int) -> None:
        """Called by ``xlaprof.step``: from now on steps end at step exits, not at syncs."""
        if not self.user_steps:
            self.user_steps = True
            self._close_step()  # the user's marks number the steps in the trace from now on
        self.user_label = number
        if self.outer is not None and self.outer.recording:
            self.outer.begin_user_step(number)

    def end_user_step(self, number: int) -> None:
        if self.recording and os.getpid() == self.pid:
            self.boundary()
        if self.outer is not None and self.outer.recording:
            self.outer.end_user_step(number)

    def record_region(self, name: str, seconds: float) -> None:
        with self.lock:
            entry = self.regions[name]
            entry[0] += 1
            entry[1] += seconds
        if self.outer is not None and self.outer.recording:
            self.outer.record_region(name, seconds)

    def boundary(
        self,
        graph_required: bool = False,
        sync_entered_cpu: float | None = None,
        sync_entered_wall: float | None = None,
        sync_entered_wait: float | None = None,
    ) -> None:
        """End the current step: write its row, then handle the trace window and max steps.

        Outside ``xlaprof.step`` marks, a sync that ran no graph ends no step (its time goes to
        the next one): nothing traced since the last step, or, with ``graph_required``, no
        graph built (``MpDeviceLoader``'s syncs, see ``synchook``). ``sync_entered_cpu`` and
        ``sync_entered_wall`` are the thread's CPU clock and ``time.perf_counter()`` when the
        sync that ends the step was entered (the sync hook's), ``sync_entered_wait`` its
        run-queue wait then (``run_queue_wait``).

        Never raises into the training script, except the ``SystemExit`` that ``max_steps``
        asks for under ``xlaprof run``: an error stops profiling and is recorded in the run.
        """
        # The clocks first: the step's host CPU must not hold the boundary's own reads.
        now, cpu_now = time.perf_counter(), time.thread_time()
        wait_now = self._run_queue.read()
        try:
            with self.lock:
                if not self.recording:
                    return
                assert self.metrics is not None
                if not self.user_steps and self.metrics.idle(graph_required):
                    return
                done = self._boundary(
                    now, cpu_now, sync_entered_cpu, sync_entered_wall, wait_now, sync_entered_wait
                )
        except Exception as error:
            self._degrade("a step boundary", error)
            return
        if done:
            self.finish("max_steps", detail=f"stopped after {self.step_index} steps")
            if self.exit_on_max_steps:
                raise SystemExit(0)

    def _boundary(
        self,
        now: float,
        cpu_now: float,
        sync_entered_cpu: float | None,
        sync_entered_wall: float | None = None,
        wait_now: float | None = None,
        sync_entered_wait: float | None = None,
    ) -> bool:
        """End the finished step; True when ``max_steps`` is reached.

        Only what must be read now is read here (clocks, log sizes, the runtime's metrics);
        its row is built later by ``_write_pending``, with the other steps kept since the last
        flush (see ``StepMetrics``). ``now`` and ``cpu_now`` are the wall and thread CPU clocks
        read as ``boundary`` was entered; ``sync_entered_cpu`` is the thread CPU clock as the
        sync that ends the step was entered (None without one); ``sync_entered_wall`` its
        ``perf_counter`` then; ``wait_now`` the thread's run-queue wait as ``boundary`` was
        entered (``RunQueueClock``; None where not measured) and ``sync_entered_wait`` as the
        sync was.
        """
        assert self.metrics is not None
        self._close_step()  # the step ends here, as its row's wall time does (before the window
        # stops below: a step the window traced is in it whole)
        step = self.user_label if self.user_label is not None else self.step_index
        capture_wall, capture_cpu, capture_sync = (
            (0.0, 0.0, 0.0) if self.graph_capture is None else self.graph_capture.take_cost()
        )
        debug_offset = self._debug_log.size()
        fallback_offset = self._fallback_log.size()
        eager = self._note_eager_mode()
        reading, aten, compiles = self.metrics.take(
            fallbacks=not self._fallback_log.tracking or fallback_offset != self._fallback_seen
        )
        self._fallback_seen = fallback_offset
        if self.graph_capture is not None:
            self.graph_capture.step_ended(step, compiles)
        regions = None
        if self.regions:
            regions, self.regions = self.regions, defaultdict(lambda: [0, 0.0])
        self._pending.append(
            _EndedStep(
                step,
                self.step_start_wall,
                now - self.step_start - capture_wall,
                cpu_now - self.step_cpu_start - capture_cpu,
                None if sync_entered_cpu is None else cpu_now - sync_entered_cpu - capture_sync,
                None
                if sync_entered_wall is None
                else max(now - sync_entered_wall - capture_wall, 0.0),
                self._run_queue.since_start(wait_now),
                None
                if wait_now is None or sync_entered_wait is None
                else max(wait_now - sync_entered_wait, 0.0),
                debug_offset,
                fallback_offset,
                reading,
                aten,
                regions,
                eager,
                self.metrics.eager_seen,
            )
        )
        if self.modules is not None:
            if self.modules.step_ended():  # a step that ran no forward leaves it recording
                self._write_modules(step)
        elif self.step_index == 0:
            self._start_module_recorder()
        self.step_index += 1
        self.info.steps_recorded = self.step_index
        self._next_step()
        return self.max_steps is not None and self.step_index >= self.max_steps

    def _note_eager_mode(self) -> bool | None:
        """Whether eager mode is on as the step ends (None: this torch_xla cannot say), noted
        in run.json: on if it ever was."""
        assert self.metrics is not None
        eager = self.metrics.eager_mode()
        if eager:
            self.info.eager_mode = True
        elif eager is not None and self.info.eager_mode is None:
            self.info.eager_mode = False
        return eager

    def _next_step(self) -> None:
        """After a boundary: rows and run.json to disk about once a second, the trace window
        started or stopped, and the next step opened."""
        if time.monotonic() - self._info_written >= FLUSH_SECONDS:
            self._info_written = time.monotonic()
            # A full disk must not stop training; finish() writes run.json again anyway.
            with contextlib.suppress(OSError):
                self._flush_rows()  # rows first: run.json never counts a row not on disk
                write_info(self.directory, self.info, durable=False)
        self.user_label = None
        if self.trace_steps is not None and self.window is not None:
            if self.step_index == self.trace_steps[0] and not self.window.tracing:
                self.window.start()
            elif self.step_index == self.trace_steps[1] and self.window.tracing:
                self.window.stop()
        self._open_step()  # after the window starts: a step it traces is in it whole; where
        # the next row's wall time begins
        self.step_start = time.perf_counter()
        self.step_start_wall = time.time()
        self.step_cpu_start = time.thread_time()
        self._run_queue.restart()

    def run_queue_wait(self) -> float | None:
        """The calling thread's run-queue wait so far (seconds; None where not measured): the
        sync hook reads it as a sync is entered, so the step's wait inside the sync is known."""
        return self._run_queue.read()

    def step_label(self) -> int:
        """The number the step in progress will have in ``steps.jsonl`` (read by the sampler)."""
        return self.user_label if self.user_label is not None else self.step_index

    def _take_samples(self) -> None:
        """Move the sampler's finished steps into the rows. The step in progress stays: at
        the end of the run it is the part after the last boundary, which has no row."""
        if self.sampler is None or self._samples is None:
            return
        for step, counts in sorted(self.sampler.take(keep=self.step_label()).items()):
            self._samples.add({"step": step, "samples": counts})

    def _write_pending(self) -> None:
        """Turn the steps ended since the last flush into rows of steps.jsonl and regions."""
        assert self.metrics is not None and self._steps is not None and self._regions is not None
        pending, self._pending = self._pending, []
        for ended in pending:
            row = StepRow(
                step=ended.step,
                start=ended.start,
                wall_s=ended.wall_s,
                host_cpu_s=ended.host_cpu_s,
                sync_cpu_s=ended.sync_cpu_s,
                sync_wall_s=ended.sync_wall_s,
                # Linux adds a wait when the thread is given a CPU again, so a wait that
                # began before the step can land in it: never more than the step's wall
                cpu_wait_s=None
                if ended.cpu_wait_s is None
                else min(ended.cpu_wait_s, max(ended.wall_s, 0.0)),
                sync_cpu_wait_s=None
                if ended.sync_cpu_wait_s is None or ended.sync_wall_s is None
                else min(ended.sync_cpu_wait_s, ended.sync_wall_s),
                debug_offset=ended.debug_offset,
                fallback_offset=ended.fallback_offset,
                eager=ended.eager,
            )
            self.metrics.row(row, ended.reading, ended.aten, ended.eager_read)
            # vars(), not asdict(): asdict deep-copies every field. The row is not touched again.
            self._steps.add(vars(row))
            for name, (calls, seconds) in (ended.regions or {}).items():
                self._regions.add(
                    {"step": ended.step, "name": name, "calls": calls, "seconds": seconds}
                )
        self._write_executions()

    def _write_executions(self) -> None:
        """The executions completed since the last flush as rows of executions.jsonl: launch
        and completion (Unix seconds), from their ``ExecuteTime`` samples."""
        if self.metrics is None or self._executions is None:
            return
        completed, lost = self.metrics.take_executions()
        for completion, value in completed:
            self._executions.add({"launch": completion - value / 1e9, "completion": completion})
        for missed, before in lost:
            self._executions.add({"missed": missed, "before": before})

    def _flush_rows(self) -> None:
        self._write_pending()
        self._take_samples()
        for rows in (self._steps, self._regions, self._samples, self._executions):
            if rows is not None:
                rows.flush()
        self._note_dropped()

    def _note_dropped(self) -> None:
        """Record in run.json what the per-step files' caps dropped: rows, or log bytes."""
        files = {
            STEPS: self._steps,
            REGIONS: self._regions,
            SAMPLES: self._samples,
            EXECUTIONS: self._executions,
            DEBUG_LOG: self._debug_log,
            FALLBACK_LOG: self._fallback_log,
        }
        for name, source in files.items():
            dropped = getattr(source, "dropped", 0)
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
            if self.graph_capture is not None and self.graph_capture.frames is not None:
                self.graph_capture.frames.close()
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
        outer = self.outer if self.outer is not None and self.outer.recording else None
        annotate.set_session(outer)
        self._stop_recorders()
        capture = self.graph_capture
        if self.window is not None and self.window.tracing:
            self._attempt("trace not stopped", self.window.stop, wait=status in ("ok", "max_steps"))
        self._close_step()  # after the window stopped: the unfinished step is not a step
        self._attempt(
            "sync hook not removed",
            uninstall_sync_hook,
            self._torch_xla,
            self,
            self._original_sync,
        )
        self._attempt(
            "no final metrics report", self._write_final_metrics, wait=status in ("ok", "max_steps")
        )
        if capture is not None and capture.harvester is not None:
            self._attempt("graphs not collected", capture.harvester.collect, self.step_index, True)
        if capture is not None:
            self._attempt("graphs not checked", capture.check)
        if self._steps is not None:
            self._attempt("step rows not built", self._write_pending)
        for rows in (self._steps, self._regions, self._samples, self._executions):
            if rows is not None:
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
        self._restore_environment()
        for message in self.loud:
            print(f"xlaprof: warning: {message} [{self.directory}]", file=sys.stderr)

    def _stop_recorders(self) -> None:
        """The sampler (its samples kept), the module and dynamo recorders, the eager-mode
        watch and IR debug: each stopped on its own, a failure a warning."""
        if self.sampler is not None:
            self.sampler.stop()
            if self.sampler.error is not None:
                self.info.warnings.append(f"host sampler stopped: {self.sampler.error}")
            self._attempt("host samples not kept", self._take_samples)
        self._attempt("module calls not written", self._write_modules)
        if self.dynamo is not None:
            self._attempt("dynamo recorder not stopped", self.dynamo.stop)
        if self.eager_site is not None:
            self.info.eager_mode_site = self.eager_site.site
            self._attempt("eager mode hook not removed", self.eager_site.stop)
        capture = self.graph_capture
        if capture is not None and capture.frames is not None:
            self._attempt("IR debug not restored", capture.frames.close)

    def _restore_environment(self) -> None:
        """Put back the variables ``start`` set, so the process's environment is as it was."""
        for name, value in getattr(self, "_env_before", {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

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

            self._drain(xm.wait_device_ops)
        metrics = self.directory / METRICS_DIR
        metrics.mkdir(exist_ok=True)
        atomic_write_text(metrics / FINAL_METRICS, met.metrics_report())

    def _drain(self, wait: Any) -> None:
        """Wait for the executions still queued or running (``wait``: ``wait_device_ops``),
        keeping each one's ``ExecuteTime`` sample as it completes: the run's last steps end
        when the device finishes them, which is after their syncs returned when the host ran
        ahead. torch_xla keeps a short window of samples, so the wait runs on a thread while
        this one reads them every millisecond. Nothing here adds a wait to a step: the run
        has ended (``finish``)."""
        assert self.metrics is not None
        done = threading.Event()

        def run() -> None:
            try:
                wait()
            finally:
                done.set()

        waiter = threading.Thread(target=run, name="xlaprof-drain", daemon=True)
        waiter.start()
        while not done.wait(0.001):
            self.metrics.poll_executions()
        waiter.join()
        self.metrics.poll_executions()
        self.info.drained = time.time()

    def _write_derived(self) -> None:
        from xlaprof.rundir.derive import write_derived
        from xlaprof.rundir.reader import Run

        harvester = None if self.graph_capture is None else self.graph_capture.harvester
        write_derived(Run(self.directory, self.info), graphs=harvester is not None)

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
        for rows in (self._steps, self._regions, self._samples, self._executions):
            if rows is not None:
                rows.discard()  # the parent's rows: the parent writes them
        self._pending = []
        self._step_trace = None  # the parent's step, not the child's to end
        self.recording = False
        self.finished = True
        self._run_queue.close()
        annotate.set_session(None)


class _EndedStep(NamedTuple):
    """What a boundary read of its step; its row is built at the next flush. A tuple, not a
    dataclass: it is made on the hot path, right after the step."""

    step: int
    start: float
    wall_s: float
    host_cpu_s: float
    sync_cpu_s: float | None
    sync_wall_s: float | None
    cpu_wait_s: float | None  # the thread's run-queue wait in the step (RunQueueClock)
    sync_cpu_wait_s: float | None  # the part of it inside the sync that ended the step
    debug_offset: int
    fallback_offset: int
    reading: Reading
    aten: dict[str, int] | None
    regions: dict[str, list[float]] | None
    eager: bool | None  # eager mode on as the step ended (None: this torch_xla cannot say)
    eager_read: bool  # the eager-op metrics were read for it


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


def _size(path: str | Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0
