"""A small torch.compile training-ish loop with three things that make dynamo work again.

Run with TORCH_TRACE=<dir> (see README.md here) to write the structured trace that tlparse and
``xlaprof analyze`` read. Usage: ``python compile_script.py BACKEND`` with BACKEND one of
``inductor``, ``aot_eager``, ``openxla`` (torch_xla, PJRT_DEVICE=CPU).

What happens, on purpose:
- a shape change: the batch goes from 8 rows to 5 (dynamo's size guard fails; it recompiles);
- a changed Python constant: ``scale`` goes from 2.0 to 3.0 after step 6 (dynamo specializes
  Python floats, so its guard on ``scale`` fails and it recompiles);
- a graph break: ``print`` inside the compiled function (dynamo cannot trace it).
"""

from __future__ import annotations

import sys

import torch


def step_fn(x, w, scale):
    y = torch.tanh(x @ w) * scale
    print("step")  # a graph break: dynamo does not trace print
    return (y * y).sum()


def main(backend: str) -> None:
    device = "cpu"
    if backend == "openxla":
        import torch_xla

        device = torch_xla.device()
    compiled = torch.compile(step_fn, backend=backend)
    w = torch.randn(16, 16, device=device)
    scale = 2.0
    for step in range(10):
        rows = 8 if step < 4 else 5  # the shape change, at step 4
        if step == 6:
            scale = 3.0  # the Python constant change, at step 6
        x = torch.randn(rows, 16, device=device)
        loss = compiled(x, w, scale)
        if backend == "openxla":
            torch_xla.sync()
        print(step, float(loss))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "aot_eager")
