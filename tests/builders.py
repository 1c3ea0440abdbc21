"""Inputs built by the tests: captures written event by event, HLO modules, copies of the
sample runs to damage, the pod's hosts stretched in time.

What a test expects of such an input is what was written into it (an op of 1 ms, a step of
19.9 ms, a host 1.5x slower), never what xlaprof printed.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

from helpers import SAMPLES, sample_capture, sample_run

from xlaprof.model.input import GraphInfo
from xlaprof.parse.hlo import parse_hlo
from xlaprof.parse.xplane.schema import read_xspace, xspace_class

MS = 10**9  # one millisecond in picoseconds


# ---------------------------------------------------------------- jobs for the real runtime

# A device-bound step for a script's source (after ``import torch, torch_xla``): four
# 1024x1024 matmuls and a sync. The CPU device needs tens of milliseconds for it (~50 ms on a
# quiet 2-core machine), the host well under one (~0.3 ms), so a loop of it runs its host ahead
# of its device (issue 45's tests). ``DEVICE_BOUND_MATMULS`` is the count, for a loop that
# steps the same graph its own way.
DEVICE_BOUND_MATMULS = 4
DEVICE_BOUND_STEP = f"""
device = torch_xla.device()
w = torch.randn(1024, 1024, device=device) / 32
x = torch.randn(1024, 1024, device=device)

def step():
    global x
    for _ in range({DEVICE_BOUND_MATMULS}):
        x = torch.tanh(x @ w)
    torch_xla.sync()
"""


# ---------------------------------------------------------------- xplane captures


def varint(value: int) -> bytes:
    """``value`` as a protobuf varint (a negative one as its 64-bit two's complement)."""
    value &= 2**64 - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(number: int, wire: int) -> bytes:
    """A protobuf field's key: its number and wire type."""
    return varint(number << 3 | wire)


def tpu_like_xspace(path: Path, host_steps: int = 2, steps: tuple[int, int] = (7, 8)) -> None:
    """An XSpace shaped like a TPU capture: host python line + device Steps/Modules/Ops.

    Host steps end at 10 ms and 20 ms (StepMarkers); the TPU's steps (``steps``: 7 and 8) each
    run one 6 ms module holding one 1 ms op (``fusion.1``, named by a ref stat).
    """
    space = xspace_class()()
    space.hostnames.append("tpu-vm-0")
    host = space.planes.add(id=1, name="/host:CPU")
    host.event_metadata[1].id, host.event_metadata[1].name = 1, "StepMarker"
    python = host.lines.add(id=1, name="python", timestamp_ns=1_000)
    for i in range(host_steps):  # steps end at 10 ms and 20 ms
        python.events.add(metadata_id=1, offset_ps=(i * 10 + 9) * 10**9, duration_ps=10**9)
    device = space.planes.add(id=2, name="/device:TPU:0")
    named = ((1, str(steps[0])), (2, str(steps[1])), (3, "SyncTensorsGraph.123"), (4, "fusion.1"))
    for key, name in named:
        device.event_metadata[key].id, device.event_metadata[key].name = key, name
    device.stat_metadata[1].id, device.stat_metadata[1].name = 1, "hlo_op"
    device.stat_metadata[2].id, device.stat_metadata[2].name = 2, "fusion.1"
    steps = device.lines.add(id=1, name="Steps", timestamp_ns=1_000)
    modules = device.lines.add(id=2, name="XLA Modules", timestamp_ns=1_000)
    ops = device.lines.add(id=3, name="XLA Ops", timestamp_ns=1_000)
    for index, step_meta in enumerate((1, 2)):
        begin = index * 10 * 10**9
        steps.events.add(metadata_id=step_meta, offset_ps=begin, duration_ps=8 * 10**9)
        modules.events.add(metadata_id=3, offset_ps=begin + 10**9, duration_ps=6 * 10**9)
        op = ops.events.add(metadata_id=4, offset_ps=begin + 2 * 10**9, duration_ps=10**9)
        op.stats.add(metadata_id=1, ref_value=2)
    path.write_bytes(space.SerializeToString())


def gpu_host_capture(
    path: Path, host: str, gpu: int, t0_ns: int, step_ps: int, kernels: list[tuple[str, int, int]]
) -> None:
    """An XSpace of one host with one GPU: a Steps line (one step) and a kernel stream."""
    space = xspace_class()()
    space.hostnames.append(host)
    plane = space.planes.add(id=gpu, name=f"/device:GPU:{gpu}")
    stats = ((1, "group_id"), (2, "correlation_id"), (3, "hlo_op"), (4, "hlo_module"))
    for key, name in (*stats, (5, "program_id"), (6, "tf_op")):
        plane.stat_metadata[key].id, plane.stat_metadata[key].name = key, name
    names: dict[str, int] = {}

    def meta(name: str) -> int:
        if name not in names:
            names[name] = len(names) + 1
            plane.event_metadata[names[name]].id = names[name]
            plane.event_metadata[names[name]].name = name
        return names[name]

    steps = plane.lines.add(id=0xDEADBEEF, name="Steps", timestamp_ns=t0_ns)
    step = steps.events.add(metadata_id=meta("1"), offset_ps=0, duration_ps=step_ps)
    step.stats.add(metadata_id=1, int64_value=1)
    stream = plane.lines.add(id=7, name="Stream #7(Kernel)", timestamp_ns=t0_ns)
    for index, (name, start, duration) in enumerate(kernels):
        kernel = stream.events.add(metadata_id=meta(name), offset_ps=start, duration_ps=duration)
        kernel.stats.add(metadata_id=2, int64_value=index)
        kernel.stats.add(metadata_id=3, str_value=name)
        kernel.stats.add(metadata_id=4, str_value="jit_train_step")
        kernel.stats.add(metadata_id=5, int64_value=1)
        kernel.stats.add(metadata_id=6, str_value=f"jit(train_step)/{name.split('.')[0]}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(space.SerializeToString())


def two_gpu_hosts(root: Path) -> Path:
    """GPU:4 on host-a (a 19.9 ms step) and GPU:6 on host-b (21.3 ms), 650 ms apart: a logdir."""
    session = root / "logdir" / "plugins" / "profile" / "2026_01_01_00_00_00"
    gpu_host_capture(
        session / "host-a.xplane.pb",
        "host-a",
        4,
        1_000_000,
        int(19.9 * MS),
        [("fusion.1", 1 * MS, 5 * MS), ("gemm.2", 7 * MS, 6 * MS)],
    )
    gpu_host_capture(
        session / "host-b.xplane.pb",
        "host-b",
        6,
        651_000_000,
        int(21.3 * MS),
        [("fusion.1", 1 * MS, 6 * MS), ("gemm.2", 8 * MS, int(8.8 * MS))],
    )
    return root / "logdir"


# ---------------------------------------------------------------- a pod of stretched hosts

POD_SOURCE_RUN = "healthy_loop"  # its capture holds two steps
POD_COPIES = 3  # three copies of it give a host six steps
STEP_RANGE = "xlaprof_step"  # the session's TraceMe over each step, numbered
STRETCH = 1.5


def write_pod_host(
    path: Path, stretch: float = 1.0, collective_share: float | None = None
) -> list[int]:
    """Write a host's capture (copies of a real CPU capture); return its StepMarker end times
    (ns, absolute). The copies' steps are their StepMarkers: the session's numbered step
    ranges (``xlaprof_step``, whose numbers would repeat in every copy) are left out.

    ``stretch`` multiplies every event's absolute time and duration (a host slower at
    everything). ``collective_share`` adds an ``all-reduce`` event covering that share of each
    step after the first (a host whose extra time went to waiting on a collective).
    """
    source = read_xspace(sample_capture(POD_SOURCE_RUN))
    space = xspace_class()()
    space.CopyFrom(source)
    ends_ps = [
        line.timestamp_ns * 1000 + e.offset_ps + e.duration_ps
        for plane in source.planes
        for line in plane.lines
        for e in line.events
    ]
    span = max(ends_ps) + 1  # one copy's length (ps), the same shift on every line
    markers: list[int] = []
    for plane in space.planes:
        names = {k: m.name for k, m in plane.event_metadata.items()}
        for line in plane.lines:
            base = line.timestamp_ns * 1000
            originals = list(line.events)
            del line.events[:]
            for copy in range(POD_COPIES):
                for event in originals:
                    if names.get(event.metadata_id) == STEP_RANGE:
                        continue
                    start = round((base + event.offset_ps + copy * span) * stretch)
                    added = line.events.add(
                        metadata_id=event.metadata_id,
                        offset_ps=start - base,
                        duration_ps=round(event.duration_ps * stretch),
                    )
                    added.stats.extend(event.stats)
                    if plane.name == "/host:CPU" and names.get(event.metadata_id) == "StepMarker":
                        markers.append((start + added.duration_ps) // 1000)
    markers.sort()
    if collective_share is not None:
        host = next(p for p in space.planes if p.name == "/host:CPU")
        key = max(host.event_metadata) + 1
        host.event_metadata[key].id, host.event_metadata[key].name = key, "all-reduce.7"
        line = host.lines.add(id=999, name="collectives", timestamp_ns=0)
        for begin, end in itertools.pairwise(markers):
            line.events.add(
                metadata_id=key,
                offset_ps=begin * 1000,
                duration_ps=round((end - begin) * collective_share) * 1000,
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(space.SerializeToString())
    return markers


def pod_logdir(
    root: Path, hosts: int, slow: dict[str, dict[str, Any]] | None = None
) -> dict[str, list[int]]:
    """``hosts`` captures host-0.. in one session under ``root``; their StepMarker end times."""
    session = root / "plugins" / "profile" / "session"
    markers = {}
    for i in range(hosts):
        name = f"host-{i}"
        markers[name] = write_pod_host(session / f"{name}.xplane.pb", **(slow or {}).get(name, {}))
    return markers


def marker_walls(markers: list[int]) -> dict[int, float]:
    """Step -> wall (ms) for marker-to-marker steps (step i ends at marker i)."""
    return {i: (b - a) / 1e6 for i, (a, b) in enumerate(itertools.pairwise(markers), start=1)}


# ---------------------------------------------------------------- run directories


def drop_graph_protos(run: Path) -> None:
    """Leave a run's graphs with their text only: the HloProtos kept beside them (their
    stack frames name the same source files, in a binary form a test cannot edit as text) and
    their index entries' ``proto`` removed, as a run recorded without them has it."""
    index = run / "graphs" / "index.jsonl"
    entries = [json.loads(line) for line in index.read_text().splitlines() if line]
    for entry in entries:
        if entry.pop("proto", None):
            (run / "graphs" / (entry["file"].removesuffix(".txt.gz") + ".pb.gz")).unlink()
    index.write_text("".join(json.dumps(entry) + "\n" for entry in entries))


def copy_run(tmp_path: Path, name: str = "recompile_varying_batch") -> Path:
    """A sample run's directory copied under ``tmp_path`` (without its trace), to damage."""
    source = next(sample_run(name).glob("*/run.json")).parent
    target = tmp_path / name
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("plugins"))
    return target


# ---------------------------------------------------------------- HLO modules

_OPCODES = (
    "tanh",
    "multiply",
    "add",
    "exponential",
    "negate",
    "log",
    "sqrt",
    "abs",
    "sine",
    "cosine",
)


def hlo(
    blocks: int,
    block_ops: int,
    file: str = "",
    line: int = 0,
    shape: str = "f32[8,16]",
    params: list[str] | None = None,
) -> str:
    """An HLO module: parameters, then ``blocks`` copies of a ``block_ops``-op block.

    Opcodes cycle through ten, so a block of at most ten ops is what it says.
    """
    meta = (
        f', metadata={{op_type="aten__tanh" source_file="{file}" source_line={line}}}'
        if file
        else ""
    )
    lines = [
        f"HloModule m, entry_computation_layout={{()->{shape}}}",
        "",
        "ENTRY %m (p0: f32[8,16]) -> f32[8,16] {",
    ]
    for number, param in enumerate(params or [shape]):
        meta_p = f'metadata={{op_type="xla__device_data" source_file="{file}" source_line=3}}'
        lines.append(f"  %p{number} = {param}{{1,0}} parameter({number}), {meta_p}")
    previous = "p0"
    count = 0
    for _ in range(blocks):
        for op in range(block_ops):
            name = f"i{count}"
            lines.append(
                f"  %{name} = {shape}{{1,0}} {_OPCODES[op % len(_OPCODES)]}(%{previous}){meta}"
            )
            previous, count = name, count + 1
    lines.append("}")
    return "\n".join(lines)


def graph(text: str, order: int = 0) -> GraphInfo:
    """A compiled graph of ``text`` (HLO), compiled at step ``order``."""
    return GraphInfo(order=order, step=order, module=f"m{order}", hlo=parse_hlo(text))


def host_rows(table: Any) -> Any:
    """Straggler rows of the host planes (step markers), by step."""
    return table[table["device"] == "host"].set_index("step")


def two_pod_hosts(root: Path) -> Path:
    """Two copies of the pod host's capture in one session under ``root``; the session."""
    session = root / "plugins" / "profile" / "session"
    for name in ("host-0", "host-1"):
        write_pod_host(session / f"{name}.xplane.pb")
    return session


def pod_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Environment of a pod analysis: per-host caches always (``XLAPROF_LAZY_BYTES=0``), and a
    home of the test's own, where the private cache folder and its key live."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"XLAPROF_LAZY_BYTES": "0", "HOME": str(home), **extra}


def analysis_input(kind: str, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A real input of ``kind`` (``run``, ``capture``, ``log`` or ``pod``) and the environment
    it is analyzed in (a pod: by workers, its hosts written under ``tmp_path``)."""
    if kind == "run":
        return sample_run("recompile_varying_batch"), {}
    if kind == "capture":
        return SAMPLES / "host_capture" / "torch_profiler_cpu.pt.trace.json.gz", {}
    if kind == "log":
        return SAMPLES / "recompile_varying_batch.log", {}
    pod = tmp_path / "pod"
    pod_logdir(pod, 3, {"host-1": {"stretch": STRETCH}})
    return pod, pod_env(tmp_path)


# ---------------------------------------------------------------- hostile names (issue 31)

HOSTILE = (
    "\x1b]0;pwned\x07\x1b]8;;https://evil.example\x07click\x1b]8;;\x07\x1b[8mhidden\x1b[2K\r\u202e"
)
OP_NAMES = [
    "[link=https://evil.example]op[/link]",
    "[/oops]",
    '<a href="https://evil.example">x</a><br>y',
    f"kernel{HOSTILE}",
]


def hostile_chrome_trace(path: Path) -> None:
    """A Kineto-style trace: a GPU whose ops, process and thread carry hostile names."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": f"gpu{HOSTILE}"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "args": {"labels": "GPU 0"}},
        {"ph": "M", "name": "process_name", "pid": 9, "args": {"name": f"host{HOSTILE}"}},
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": 1, "args": {"name": HOSTILE}},
    ]
    ts = 1000.0
    for step in range(4):
        events.append(
            {"ph": "X", "name": f"ProfilerStep#{step}", "pid": 9, "tid": 1, "ts": ts, "dur": 900.0}
        )
        for index, name in enumerate(OP_NAMES):
            events.append(
                {
                    "ph": "X",
                    "name": name,
                    "pid": 0,
                    "tid": 7,
                    "ts": ts + 10 + index * 200,
                    "dur": 150.0 + index,
                    "cat": "kernel",
                }
            )
        ts += 1000.0
    path.write_text(json.dumps({"traceEvents": events}))


def one_metrics_report() -> str:
    """The metrics report at the end of the healthy loop's job log: one real report's text."""
    text = (SAMPLES / "healthy_loop.log").read_text()
    return text[text.index("Metric:") :]


# A training script's source: loops the source rules read (lines 2-11) and a time loop over
# a cell (``forward``, its loop at line 16 calling ``self.cell`` at line 17).
TRAINING_SOURCE = """\
def main():
    tokens = start()
    for step in range(8):
        nxt = model(tokens)
        tokens = torch.cat([tokens, nxt], 1)
        torch_xla.sync()
    for step in range(8):
        x = make(step)
        loss = step_fn(x)
    for x, y in loader:
        pass


def forward(self, seq):
    h = zeros()
    for t in range(seq.shape[1]):
        h = self.cell(seq[:, t], h)
    return h
"""


def paced_steps(
    host_cpu_s: float, device_s: float, wall_s: float, count: int = 8, **fields: Any
) -> tuple[list[Any], list[Any]]:
    """Step rows and their executions for a loop whose host takes ``wall_s`` a step (using
    ``host_cpu_s`` of CPU) and launches one graph at each step's end, which the device runs
    in ``device_s`` (less than ``wall_s``: it never queues). ``fields`` go on every row."""
    from xlaprof.rundir.schema import ExecutionRow, StepRow

    start = 1_800_000_000.0
    rows = [
        StepRow(
            step=i,
            start=start + i * wall_s,
            wall_s=wall_s,
            host_cpu_s=host_cpu_s,
            executions=1,
            execute_s=device_s,
            graphs=1,
            **fields,
        )
        for i in range(count)
    ]
    runs = [
        ExecutionRow(
            launch=start + (i + 1) * wall_s, completion=start + (i + 1) * wall_s + device_s
        )
        for i in range(count)
    ]
    return rows, runs
