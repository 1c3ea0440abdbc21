"""A neural ODE integrated with a fixed-step Euler solver on the XLA device, at inference: the
vector field is a small torchvision MLP, 8 Euler steps of `x = x + dt * f(x)` in a Python loop,
no sync until the trajectory's end point is read.

Source: the fixed-grid Euler solver of rtqichen/torchdiffeq (torchdiffeq/_impl/fixed_grid.py:
`Euler._step_func`, `dt * func(t0, y0)`) and its examples/ode_demo.py, reproduced in our own
words with a time-independent vector field.

What is true (bare runtime): nothing syncs, so the 8 steps trace into one graph holding 8 copies
of the MLP step, compiled and run once. The body is pure tensor work: the loop variable is unused
and dt is a constant, so torch_xla.experimental.scan can run it (one step traced and compiled,
looped on the device); a sync per step would also give one small graph."""

import torch
import torch_xla
from torchvision.ops import MLP

STEPS = 8
DT = 0.1


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    field = MLP(16, [64, 64, 16], activation_layer=torch.nn.Tanh).to(device).eval()
    x = torch.randn(32, 16).to(device)
    with torch.no_grad():
        for _ in range(STEPS):  # expect: unrolled_loop
            x = x + DT * field(x)
    print(f"end point mean {x.cpu().mean().item():.4f}")


if __name__ == "__main__":
    main()
