"""A fixed-shape training loop that times its own steps: the workloads of ``overhead.py``.

``python overhead_loop.py WORKLOAD`` prints one JSON line about the steps after warm-up:

* ``step_s``: median wall time from one ``torch_xla.sync()`` return to the next (what a user
  feels; device time counts once the queue is full);
* ``cpu_s``: median CPU time of the stepping thread per step (host work, waits excluded);
* ``python_s``: mean wall time from the step's start to its ``sync()`` call (tracing the ops);
* ``lazy_tracing_s``: torch_xla's ``LazyTracing`` accumulator over the steady steps, per step
  (read twice, not per step, so the bare loop does nothing xlaprof does);
* ``rss_mb``: peak resident memory of this process;
* with ``--alternate-parts`` (bare only), two switches crossed in one process, each balanced
  over the other, free of between-process noise: IR debug on every other step (switching does
  not recompile) and xlaprof's host sampler thread running in every other block of
  ``SAMPLER_BLOCK`` steps. ``ir_on_cpu_s``/``ir_off_cpu_s``: the median host CPU of the steps
  traced with IR debug on and off (what per-op Python stacks cost);
  ``sampler_on_s``/``sampler_off_s``: the median step time with the sampler running or not;
* under ``xlaprof run`` also ``boundary_s`` and ``boundary_mean_s``: median and mean CPU time
  xlaprof's step boundary took (what it does at each sync: metric reads, the row kept, IR
  debug switched, graphs moved; the mean includes the once-a-second flush of rows and
  ``run.json``); and ``hook_s``: what the sync hook adds to one ``sync()`` call besides the
  boundary.

Workloads: ``tiny`` (640 element-wise ops on 64 floats per step: tracing-bound), ``mlp24`` (a
24-layer 256-wide MLP with Adam, forward and backward), ``matmul`` (four 512x512 matmuls per
step: device-bound; its warm-up is longer, as the first ~30 syncs only fill the runtime's
queue of pending executions).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch
import torch_xla

WORKLOADS = ("tiny", "mlp24", "matmul")


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
    w = torch.randn(512, 512, device=device) / 512**0.5
    held = [torch.randn(512, 512, device=device)]

    def body() -> None:
        x = held[0]
        for _ in range(4):
            x = torch.tanh(x @ w)
        held[0] = x

    return body


SAMPLER_BLOCK = 10  # steps per block with and without the sampler (--alternate-parts)


def _sampled(index: int) -> bool:
    """Whether the step at ``index`` runs with the sampler (--alternate-parts)."""
    return (index // SAMPLER_BLOCK) % 2 == 1


def _switch_sampler(sampler, index: int):  # type: ignore[no-untyped-def]
    """Start xlaprof's host sampler at a block that samples, stop it at one that does not."""
    from xlaprof.capture.sampler import DEFAULT_SAMPLE_HZ, HostSampler

    if _sampled(index) and sampler is None:
        sampler = HostSampler(DEFAULT_SAMPLE_HZ)
        sampler.start()
    elif not _sampled(index) and sampler is not None:
        sampler.stop()
        sampler = None
    return sampler


def _hook_cost() -> float:
    """Seconds the sync hook adds to one call, around a sync that does nothing (its boundary
    replaced by a no-op), measured on a stand-in module so no graph runs."""
    import timeit
    import types

    from xlaprof.capture.synchook import install_sync_hook

    module = types.SimpleNamespace(sync=lambda: None)
    session = types.SimpleNamespace(
        recording=True, user_steps=False, pid=os.getpid(), boundary=lambda **_: None
    )
    plain = module.sync
    install_sync_hook(module, session)
    hooked = module.sync
    count = 200_000
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

    def timed() -> None:
        start = time.thread_time()  # CPU: on a busy machine wall time adds waits for a core
        boundary()
        durations.append(time.thread_time() - start)

    session.boundary = timed
    return durations


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=WORKLOADS)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=None, help="default 20 (matmul: 40)")
    parser.add_argument("--alternate-parts", action="store_true")
    args = parser.parse_args()
    if args.warmup is None:
        args.warmup = 40 if args.workload == "matmul" else 20
    torch.manual_seed(0)
    body = _workload(args.workload)
    torch_xla.sync()
    sampler = None
    boundaries = _time_boundaries()
    wall, cpu, python = [], [], []
    lazy_start = 0.0
    last, last_cpu = time.perf_counter(), time.thread_time()
    for index in range(args.steps):
        if index == args.warmup:
            lazy_start = _lazy_tracing_ns()
        if args.alternate_parts:
            torch_xla._XLAC._set_ir_debug(index % 2 == 0)
            sampler = _switch_sampler(sampler, index)
        start = time.perf_counter()
        body()
        python.append(time.perf_counter() - start)
        torch_xla.sync()
        now, now_cpu = time.perf_counter(), time.thread_time()
        wall.append(now - last)
        cpu.append(now_cpu - last_cpu)
        last, last_cpu = now, now_cpu
    steady = args.steps - args.warmup
    lazy = (_lazy_tracing_ns() - lazy_start) / 1e9 / steady
    torch_xla._XLAC._xla_wait_device_ops([])
    result = {
        "step_s": statistics.median(wall[args.warmup :]),
        "cpu_s": statistics.median(cpu[args.warmup :]),
        "python_s": statistics.fmean(python[args.warmup :]),
        "lazy_tracing_s": lazy,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "steps": steady,
    }
    if args.alternate_parts:
        if sampler is not None:
            sampler.stop()
        steady_steps = range(args.warmup, args.steps)
        result["ir_on_cpu_s"] = statistics.median(cpu[i] for i in steady_steps if i % 2 == 0)
        result["ir_off_cpu_s"] = statistics.median(cpu[i] for i in steady_steps if i % 2)
        sampled = [_sampled(i) for i in steady_steps]
        result["sampler_on_s"] = statistics.median(
            wall[i] for i, on in zip(steady_steps, sampled, strict=True) if on
        )
        result["sampler_off_s"] = statistics.median(
            wall[i] for i, on in zip(steady_steps, sampled, strict=True) if not on
        )
    if boundaries:
        result["boundary_s"] = statistics.median(boundaries[args.warmup :])
        result["boundary_mean_s"] = statistics.fmean(boundaries[args.warmup :])
        result["hook_s"] = _hook_cost()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
