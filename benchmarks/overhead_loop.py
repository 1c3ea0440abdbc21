"""A fixed-shape training loop that times its own steps: the workloads of ``overhead.py``.

``python overhead_loop.py WORKLOAD`` prints one JSON line about the steps after warm-up:

* ``step_s``: wall time per step over the steady steps, first sync to last (throughput: what a
  job feels over an epoch, occasional costs such as a once-a-second flush included);
  ``step_median_s``: the median step, sync return to sync return;
* ``cpu_s``: CPU time of the stepping thread per step over the steady steps (host work, waits
  excluded); ``cpu_median_s`` its median step;
* ``python_s``: mean wall time from the step's start to its ``sync()`` call (tracing the ops);
  ``traced_cpu_s``: the stepping thread's CPU time over the same part, per step: the host
  tracing time, without torch_xla's work in the sync;
* ``lazy_tracing_s``: torch_xla's ``LazyTracing`` accumulator over the steady steps, per step
  (read twice, not per step, so the bare loop does nothing xlaprof does);
* ``rss_mb``: peak resident memory of this process;
* with ``--toggle PART``, one part of xlaprof switched on and off inside this one process, so
  the machine's drift (on the 2-core VM this was written on, +-4% between blocks of 100 steps
  of the same process) hits both sides alike: ``ir_debug`` (bare: IR debug on every other step;
  switching does not recompile), ``sampler`` (bare: xlaprof's host sampler thread running in
  every other block of ``BLOCK`` steps), ``boundary`` (under ``xlaprof run``: the session's step
  boundary done in every other block, skipped in the others). Reported: ``on_cpu_s``,
  ``off_cpu_s``, ``on_step_s``, ``off_step_s``, each a 10%-trimmed mean over the steady steps of
  that side (a part that costs on some steps only, like a sampler tick, shows in a mean, not in a
  median), the first step of each block left out;
* with ``--pin``, from the end of warm-up the Python threads (the host: the stepping thread,
  xlaprof's sampler) run on the last core and the runtime's native threads (the device's
  executions) on the others, reported as ``pinned``, absent where it could not be done;
* under ``xlaprof run`` also ``boundary_s`` and ``boundary_mean_s``: median and mean CPU time
  of the step boundary itself (metric reads, the row kept, IR debug switched, graphs moved; the
  mean includes the once-a-second flush of rows and ``run.json``): where its time goes, not what
  it costs the job (work placed at the boundary can take time the step would spend anyway, e.g.
  the allocator's deferred consolidation, measured in ``--toggle boundary``); and ``hook_s``: what
  the sync hook adds to one ``sync()`` call besides the boundary.

Workloads: ``tiny`` (640 element-wise ops on 64 floats per step: tracing-bound), ``mlp24`` (a
24-layer 256-wide MLP with Adam, forward and backward), ``matmul`` (four 512x512 matmuls per
step: device-bound; its warm-up is longer, as the first ~30 syncs only fill the runtime's
queue of pending executions), and ``trivial`` (one op a step: what each execution costs the host,
e.g. PT_XLA_DEBUG's analysis of it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

import torch
import torch_xla

WORKLOADS = ("tiny", "mlp24", "matmul", "trivial")


def _lazy_tracing_ns() -> float:
    data = torch_xla._XLAC._xla_metric_data("LazyTracing")
    return 0.0 if data is None else float(data[1])


def _workload(name: str):  # type: ignore[no-untyped-def]
    device = torch_xla.device()
    if name == "tiny":
        weights = [torch.randn(64, device=device) for _ in range(16)]
        state = [torch.zeros(64, device=device)]

        def body() -> None:
            x = state[0]
            for _ in range(20):
                for w in weights:
                    x = x * 0.999 + w * 0.001
            state[0] = x

        return body
    if name == "mlp24":
        layers: list[torch.nn.Module] = []
        for _ in range(24):
            layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
        model = torch.nn.Sequential(*layers).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
        x = torch.randn(64, 256).to(device)

        def body() -> None:
            loss = model(x).pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

        return body
    if name == "trivial":  # one op a step: a step is the runtime's per-execution work
        counter = [torch.zeros(8, device=device)]

        def body() -> None:
            counter[0] = counter[0] + 1

        return body
    w = torch.randn(512, 512, device=device) / 512**0.5
    held = [torch.randn(512, 512, device=device)]

    def body() -> None:
        x = held[0]
        for _ in range(4):
            x = torch.tanh(x @ w)
        held[0] = x

    return body


BLOCK = int(os.environ.get("OVERHEAD_BLOCK", "5"))  # steps per block (--toggle sampler|boundary)
TOGGLES = ("ir_debug", "sampler", "boundary")


def _part_on(toggle: str, index: int) -> bool:
    """Whether the step at ``index`` runs with the toggled part."""
    if toggle == "ir_debug":
        return index % 2 == 0
    return (index // BLOCK) % 2 == 1


def _first_of_block(toggle: str, index: int) -> bool:
    return toggle != "ir_debug" and index % BLOCK == 0


def _trimmed_mean(values: list[float], cut: float = 0.1) -> float:
    """Mean of ``values`` without the lowest and highest ``cut`` of them."""
    ordered = sorted(values)
    drop = int(len(ordered) * cut)
    kept = ordered[drop : len(ordered) - drop] or ordered
    return statistics.fmean(kept)


class Toggle:
    """Switches one part of xlaprof on and off between steps (``--toggle``)."""

    def __init__(self, part: str) -> None:
        self.part = part
        self.sampler = None
        self.boundary = None
        self.session = None
        if part == "boundary":
            from xlaprof.capture import annotate

            self.session = annotate.STATE.session
            if self.session is None:
                raise SystemExit("--toggle boundary runs under xlaprof run")
            self.boundary = self.session.boundary

    def set(self, index: int) -> None:
        on = _part_on(self.part, index)
        if self.part == "ir_debug":
            torch_xla._XLAC._set_ir_debug(on)
        elif self.part == "sampler":
            from xlaprof.capture.sampler import DEFAULT_SAMPLE_HZ, HostSampler

            if on and self.sampler is None:
                hz = float(os.environ.get("XLAPROF_SAMPLE_HZ", DEFAULT_SAMPLE_HZ))
                self.sampler = HostSampler(hz)
                self.sampler.start()
            elif not on and self.sampler is not None:
                self.sampler.stop()
                self.sampler = None
        else:
            self.session.boundary = self.boundary if on else (lambda *a, **k: None)

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()
        if self.session is not None:
            self.session.boundary = self.boundary


def _pin_threads() -> dict[str, object] | None:
    """Give the CPU device cores of its own: Python's threads on the last core, the runtime's
    native threads (the device's executions) on the others.

    On a TPU or GPU host the device never runs on the host's cores, so the host's extra work
    (xlaprof's included) cannot slow a device-bound step; on the CPU runtime it can: when an
    execution finishes and wakes the stepping thread, the scheduler may run that thread on the
    core the execution is using. Threads that run Python (the stepping thread, xlaprof's
    sampler) are the host; every other thread of the process is the runtime's. None where the
    process has one core (nothing to separate) or Linux's per-thread affinity is missing.
    """
    tasks = Path("/proc/self/task")
    if not hasattr(os, "sched_setaffinity") or not tasks.is_dir():
        return None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return None
    host, device = {cores[-1]}, set(cores[:-1])
    python = {thread.native_id for thread in threading.enumerate()}
    native = 0
    for entry in tasks.iterdir():
        tid = int(entry.name)
        try:
            os.sched_setaffinity(tid, host if tid in python else device)
        except OSError:  # the thread ended meanwhile
            continue
        native += tid not in python
    return {"host_cores": sorted(host), "device_cores": sorted(device), "native_threads": native}


def _hook_cost(count: int = 200_000) -> float:
    """Seconds the sync hook adds to one call, around a sync that does nothing (its boundary
    replaced by a no-op), measured on a stand-in module so no graph runs (``count`` calls,
    best of 5)."""
    import timeit
    import types

    from xlaprof.capture.runqueue import RunQueueClock
    from xlaprof.capture.synchook import install_sync_hook

    module = types.SimpleNamespace(sync=lambda: None)
    # what the hook asks of a session: the run-queue clock read as the real session reads it
    session = types.SimpleNamespace(
        recording=True,
        user_steps=False,
        pid=os.getpid(),
        boundary=lambda **_: None,
        graph_capture=None,
        run_queue_wait=RunQueueClock().read,
        step_index=0,
        step_label=lambda: 0,
    )
    plain = module.sync
    install_sync_hook(module, session)
    hooked = module.sync
    with_hook = min(timeit.repeat(hooked, number=count, repeat=5)) / count
    without = min(timeit.repeat(plain, number=count, repeat=5)) / count
    return with_hook - without


def _time_boundaries() -> list[float] | None:
    """Under ``xlaprof run``: wrap the session's boundary to time it; None when bare."""
    if "xlaprof" not in sys.modules:
        return None
    from xlaprof.capture import annotate

    session = annotate.STATE.session
    if session is None:
        return None
    durations: list[float] = []
    boundary = session.boundary

    def timed(**kwargs: object) -> None:
        start = time.thread_time()  # CPU: on a busy machine wall time adds waits for a core
        boundary(**kwargs)
        durations.append(time.thread_time() - start)

    session.boundary = timed
    return durations


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=WORKLOADS)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=None, help="default 20 (matmul: 40)")
    parser.add_argument("--toggle", choices=TOGGLES, help="switch one part on and off")
    parser.add_argument(
        "--pin", action="store_true", help="the device's threads on cores the host's do not use"
    )
    args = parser.parse_args()
    if args.warmup is None:
        args.warmup = 40 if args.workload == "matmul" else 20
    torch.manual_seed(0)
    body = _workload(args.workload)
    torch_xla.sync()
    toggle = Toggle(args.toggle) if args.toggle else None
    boundaries = None if toggle else _time_boundaries()
    wall, cpu, python, traced = [], [], [], []
    lazy_start = 0.0
    pinned = None
    last, last_cpu = time.perf_counter(), time.thread_time()
    steady_wall = steady_cpu = 0.0
    for index in range(args.steps):
        if index == args.warmup:
            pinned = _pin_threads() if args.pin else None
            lazy_start = _lazy_tracing_ns()
            steady_wall, steady_cpu = last, last_cpu
        if toggle is not None:
            toggle.set(index)
        start = time.perf_counter()
        body()
        python.append(time.perf_counter() - start)
        before_sync_cpu = time.thread_time()
        torch_xla.sync()
        now, now_cpu = time.perf_counter(), time.thread_time()
        wall.append(now - last)
        cpu.append(now_cpu - last_cpu)
        traced.append(before_sync_cpu - last_cpu)
        last, last_cpu = now, now_cpu
    steady = args.steps - args.warmup
    lazy = (_lazy_tracing_ns() - lazy_start) / 1e9 / steady
    torch_xla._XLAC._xla_wait_device_ops([])
    if toggle is not None:
        toggle.close()
    result = {
        "step_s": (last - steady_wall) / steady,
        "step_median_s": statistics.median(wall[args.warmup :]),
        "cpu_s": (last_cpu - steady_cpu) / steady,
        "cpu_median_s": statistics.median(cpu[args.warmup :]),
        "python_s": statistics.fmean(python[args.warmup :]),
        "traced_cpu_s": statistics.fmean(traced[args.warmup :]),
        "lazy_tracing_s": lazy,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "steps": steady,
    }
    if pinned:
        result["pinned"] = pinned
    if toggle is not None:
        for side, on in (("on", True), ("off", False)):
            kept = [
                i
                for i in range(args.warmup, args.steps)
                if _part_on(args.toggle, i) == on and not _first_of_block(args.toggle, i)
            ]
            result[f"{side}_cpu_s"] = _trimmed_mean([cpu[i] for i in kept])
            result[f"{side}_step_s"] = _trimmed_mean([wall[i] for i in kept])
    if boundaries:
        result["boundary_s"] = statistics.median(boundaries[args.warmup :])
        result["boundary_mean_s"] = statistics.fmean(boundaries[args.warmup :])
        result["hook_s"] = _hook_cost()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
