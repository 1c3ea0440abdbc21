"""An XSpace capture (torch_xla on the CPU device) and the TORCH_TRACE log of the same run.

``PJRT_DEVICE=CPU TORCH_TRACE=OUT/torch_trace python make_xla_capture.py OUT`` runs a function
under ``torch.compile(backend="openxla")`` for 8 steps, each in ``xp.StepTrace``, inside
``xp.start_trace(OUT)``; the batch shrinks from 8 to 5 rows at step 5, so dynamo compiles again
there. The capture's host plane times its lines from the session start, and its
``profile_start_time`` says when that was: what places the log's compiles in its steps.
"""

from __future__ import annotations

import sys

import torch
import torch_xla
import torch_xla.debug.profiler as xp


def step_fn(x, w):
    return torch.tanh(x @ w).sum()


def main(out: str) -> None:
    device = torch_xla.device()
    compiled = torch.compile(step_fn, backend="openxla")
    w = torch.randn(16, 16, device=device)
    xp.start_trace(out)
    for step in range(8):
        with xp.StepTrace("train_step", step_num=step):
            rows = 8 if step < 5 else 5  # the shape change, at step 5
            loss = compiled(torch.randn(rows, 16, device=device), w)
        float(loss.cpu())
    xp.stop_trace()


if __name__ == "__main__":
    main(sys.argv[1])
