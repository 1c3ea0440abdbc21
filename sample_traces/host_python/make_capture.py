"""A host-only capture whose steps are spent in the user's Python (torch 2.9 on the CPU).

``python make_capture.py OUT`` profiles 10 steps with ``torch.profiler`` (CPU activity,
``with_stack=True``: Python function events, and a schedule: ``ProfilerStep#N``). Each step
runs ``prepare``, a pure-Python pass over 300,000 numbers (a data-preparation step written in
Python), then a small matmul on its result.
"""

from __future__ import annotations

import sys

import torch

NUMBERS = list(range(300_000))


def prepare(numbers: list[int]) -> list[float]:
    return [((n * 31 + 7) % 1000) / 1000.0 for n in numbers]  # the Python the step waits on


def main(out: str) -> None:
    w = torch.randn(64, 64)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=0, warmup=0, active=10, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(out),
        with_stack=True,
    ) as prof:
        for _ in range(10):
            values = prepare(NUMBERS)
            x = torch.tensor(values[: 64 * 64]).reshape(64, 64)
            (x @ w).tanh().sum()
            prof.step()


if __name__ == "__main__":
    main(sys.argv[1])
