"""A host-only capture and the TORCH_TRACE log of the same run (torch 2.9 on the CPU).

``python make_capture.py OUT`` (with ``TORCH_TRACE=OUT/torch_trace``) trains a small compiled
model for 12 steps under ``torch.profiler`` (CPU activity only: no device), each step marked
by the profiler (``prof.step()``: ``ProfilerStep#N``), with:

- a slow read: the dataset sleeps 15 ms in ``__getitem__`` for each batch, so every step
  waits on the DataLoader;
- a compile in a steady step: from step 8 the batch has 12 rows instead of 16, so dynamo
  compiles the model again in the middle of training.

It writes ``OUT/*.pt.trace.json`` (Kineto) and the TORCH_TRACE log, whose compile times the
capture shows in the step they cost.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

STEPS = 12
SHAPE_CHANGE_STEP = 8
READ_SECONDS = 0.015


class SlowData(Dataset):
    def __len__(self) -> int:
        return STEPS

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(READ_SECONDS)  # the slow read: a network file system, a decoder
        rows = 16 if index < SHAPE_CHANGE_STEP else 12
        return torch.randn(rows, 64)


def main(out: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    compiled = torch.compile(model, backend="aot_eager")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(SlowData(), batch_size=None, num_workers=0)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        # a schedule makes prof.step() mark each step (ProfilerStep#N); all steps recorded
        schedule=torch.profiler.schedule(wait=0, warmup=0, active=STEPS, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(out)),
        with_stack=False,
    ) as prof:
        for batch in loader:
            loss = compiled(batch).pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            prof.step()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
