"""The run-directory format: file names and the records they hold (docs/run-directory.md).

This module is the one home of the on-disk format, shared by the writer (the training process)
and the reader (analysis, anywhere). It imports nothing heavy: the training process loads it.

One process writes one run directory::


    run.json          RunInfo: versions, device, env flags, command, times, how it ended
    steps.jsonl       one line per finished step: metric deltas, wall time, log offsets
    executions.jsonl  one line per graph execution: when it was launched and when it completed
    regions.jsonl     per step and user region: calls and host seconds
    samples.jsonl     per step: host CPU seconds by the user's source line (where host work went)
    events.jsonl      compile/execute events with their step (written when the run ends)
    dynamo.jsonl      torch.compile: dynamo's recompile reasons, graph breaks and compiles
    modules.json      the module stacks and repeated module calls of one step
    debug.log         raw PT_XLA_DEBUG_LEVEL output (torch_xla writes it as it goes)
    fallbacks.log     raw fallback-tracker records (XLA_FNTRACKER_FILE)
    metrics/final.txt raw metrics_report() at the end
    graphs/           each compiled graph's HLO (before XLA's optimizations, with source
                      file:line metadata), gzipped, and index.jsonl tying them to steps
    plugins/profile/<timestamp>/<host>.xplane.pb   traces, TensorBoard/XProf layout

``xlaprof run --out DIR`` puts one such directory per process under DIR. Everything here is
plain files read without torch or torch_xla, so a run captured on a TPU VM is analyzed anywhere.
Line files are appended one whole line at a time and a cut last line is ignored, so a killed run
still loads up to its last finished step. ``run.json`` is replaced atomically.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xlaprof.parse.hlo import HloModule

SCHEMA_VERSION = 1
RUN_JSON = "run.json"
STEPS = "steps.jsonl"
REGIONS = "regions.jsonl"
SAMPLES = "samples.jsonl"
# The key of ``samples.jsonl`` for host CPU time with no user frame on the stack.
SAMPLE_LIBRARY = "<library>"
EVENTS = "events.jsonl"
EXECUTIONS = "executions.jsonl"  # one line per graph execution: launch and completion
DEBUG_LOG = "debug.log"
FALLBACK_LOG = "fallbacks.log"
METRICS_DIR = "metrics"
FINAL_METRICS = "final.txt"
TRACE_DIR = Path("plugins") / "profile"
GRAPHS_DIR = "graphs"
GRAPH_INDEX = "index.jsonl"
DYNAMO = "dynamo.jsonl"  # torch.compile: recompile reasons, graph breaks, compiles
MODULES = "modules.json"  # the module tree and module calls of one step
# torch.compile's structured trace (TORCH_TRACE, tlparse's input): `xlaprof run` points it at
# <out>/torch_trace/ (one log per process, told apart by the process id in each record)
TORCH_TRACE_DIR = "torch_trace"
# The id of one `xlaprof run` launch, in the environment of its processes (run.json records
# XLAPROF_* variables): the process folders of one run share it, and a re-run into the same
# --out gets a new one, so commands tell the runs of one folder apart.
LAUNCH_ENV = "XLAPROF_LAUNCH_ID"


@dataclass
class RunInfo:
    """``run.json``. Fields added in later versions get defaults, so old runs still load."""

    schema: int = SCHEMA_VERSION
    xlaprof_version: str | None = None
    torch_version: str | None = None
    torch_xla_version: str | None = None
    python_version: str | None = None
    cxx11_abi: bool | None = None
    device_kind: str | None = None
    device_count: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    cwd: str | None = None
    host: str | None = None
    pid: int | None = None
    rank: int | None = None
    started: float | None = None
    ended: float | None = None
    # running | ok | exception | interrupted | signal | max_steps | killed
    status: str = "running"
    exit_code: int | None = None
    detail: str | None = None
    steps_recorded: int = 0
    trace_steps: list[int] | None = None
    debug_level: int | None = None
    debug_analysis: bool | None = None
    warnings: list[str] = field(default_factory=list)
    device_memory: dict[str, int] | None = None  # xm.get_memory_info at the end, if any
    script: str | None = None  # the profiled .py file, if the command ran one
    # per-step file -> rows (jsonl) or bytes (logs) dropped past the file's cap
    dropped: dict[str, int] = field(default_factory=dict)
    # where graphs/ came from: "dump" (xlaprof's HLO dump), "user_dump" (copied from the
    # user's own --xla_dump_to), "live" (taken from the live tensors at each sync: the runtime
    # started before profiling), or None (no graphs asked for, or none could be taken)
    graph_source: str | None = None
    # nesting: the run an inner profile() is nested in, and the runs nested in this one
    outer_run: str | None = None
    nested_runs: list[str] = field(default_factory=list)
    # whether torch_xla's eager mode was on at any step (None: not recorded, older runs), and
    # the user's line that turned it on, where seen ("file:line")
    eager_mode: bool | None = None
    eager_mode_site: str | None = None
    # Unix time at which the executions still queued when the run ended had all completed
    # (the session waits for them, reading each one's completion: executions.jsonl); None
    # where it did not wait (an exception, a signal) and in older runs
    drained: float | None = None

    def __post_init__(self) -> None:
        if self.script is None:
            self.script = next((c for c in self.command[1:] if c.endswith(".py")), None)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunInfo:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class StepRow:
    """One training step's deltas, as recorded by ``xlaprof run``/``profile`` (run directory).

    Times are seconds, counts are numbers of events in this step. ``debug_offset`` and
    ``fallback_offset`` are the sizes of debug.log / fallbacks.log when the step ended, which is
    how events in those logs are tied to steps.
    """

    step: int
    start: float | None = None
    wall_s: float | None = None
    host_cpu_s: float | None = None  # CPU time of the thread that ran the step
    # ... of which inside the sync() that ended the step (graph collected, hashed, handed to
    # the runtime; PT_XLA_DEBUG's execution analysis): None where no sync ended the step
    sync_cpu_s: float | None = None
    compiles: int = 0
    compile_s: float = 0.0
    executions: int = 0
    execute_s: float = 0.0
    transfers_to_device: int = 0
    to_device_s: float = 0.0
    transfers_from_device: int = 0
    from_device_s: float = 0.0
    tracing_s: float = 0.0
    graph_nodes: float | None = None
    ops: int | None = None  # lowered (xla::) op calls traced in this step
    # eager mode (each op compiled and run as its own graph): whether it was on when the step
    # ended, and the per-op compiles and executions (EagerOpCompileTime/EagerOpExecuteTime);
    # None where not recorded (older runs, or eager mode never on in the run)
    eager: bool | None = None
    eager_compiles: int | None = None
    eager_compile_s: float | None = None
    eager_executions: int | None = None
    eager_execute_s: float | None = None
    aten: dict[str, int] = field(default_factory=dict)
    debug_offset: int | None = None
    fallback_offset: int | None = None
    # graphs built in this step (``TensorsGraphSize`` samples: one per graph a sync or a read
    # hands to the runtime, each executed once); None in older runs
    graphs: int | None = None
    # wall time inside the sync() that ended the step (with ``sync_cpu_s``, its CPU time: the
    # difference is time the sync was blocked, e.g. behind a full queue of executions); None
    # where no sync ended the step, and in older runs
    sync_wall_s: float | None = None
    # time the stepping thread was ready to run but waited for a CPU (Linux's run-queue wait,
    # ``capture.runqueue``): a busy machine's share of the step's host wall time; None where
    # not measured (another system, older runs)
    cpu_wait_s: float | None = None
    # the part of ``cpu_wait_s`` inside the sync that ended the step (so the sync's wall time
    # splits into its CPU time, this wait for a CPU, and the rest: blocked); None where not
    # measured
    sync_cpu_wait_s: float | None = None


@dataclass(frozen=True)
class ExecutionRow:
    """One graph execution (``executions.jsonl``): Unix times of its launch and completion.

    From torch_xla's ``ExecuteTime`` samples: each is recorded when its execution completes,
    with the time since its launch (queue included) as its value, so launch = completion -
    value. Where torch_xla's window of samples had moved past some executions before they
    were read, a row carries ``missed`` (how many) instead of times, and ``before``: the
    completion of the first execution that read kept, which the lost ones completed before
    (None: not recorded, as by an xlaprof before it was).
    """

    launch: float | None = None
    completion: float | None = None
    missed: int = 0
    before: float | None = None


@dataclass
class GraphInfo:
    """One compiled graph: its place in compile order, its step, and its parsed HLO."""

    order: int
    step: int | None
    module: str
    hlo: HloModule | None = None  # None when the graph was too large or too many to keep
    skipped: str | None = None
    graph_hash: str | None = None  # from its compilation event (see link_graphs)


@dataclass(frozen=True)
class RegionRow:
    """Host time of one user region (``xlaprof.region``) in one step."""

    step: int
    name: str
    calls: int
    seconds: float
