"""Device-bound, logging its loss every step: large matmuls, and a ``.item()`` that waits for them.

Expected diagnosis: host_sync (the read in every step), never tracing_bound. The host traces
a few ops a step and then blocks in the read until the device has run them: the host is
waiting on the device, not tracing, however long the step.
"""

import torch
import torch_xla
from _common import arguments

SIZE = 1024


def main() -> None:
    args = arguments(default_steps=12)
    torch.manual_seed(args.seed)
    device = torch_xla.device()
    w = torch.randn(SIZE, SIZE, device=device) / SIZE**0.5
    x = torch.randn(SIZE, SIZE, device=device)
    torch_xla.sync()
    for step in range(args.steps):
        for _ in range(4):
            x = torch.tanh(x @ w)
        loss = x.pow(2).mean()
        torch_xla.sync()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
