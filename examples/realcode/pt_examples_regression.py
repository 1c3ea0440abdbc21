"""pytorch/examples' polynomial regression on the XLA device: fit a degree-4 polynomial with one
nn.Linear, a manual SGD update through `param.data.add_`, the loss read with `.item()` each
iteration for the stopping test, and no sync anywhere in the loop (the example has none: on the
CPU and CUDA it needs none). Stopped after 12 batches (the example runs until the loss is below
1e-3).

Source: pytorch/examples regression/main.py, reproduced in our own words.

What is true (bare runtime): the only executions are the `.item()` reads. A read materializes
the value it reads, not the weights: the updates `param.data.add_(...)` stay pending, so each
read's graph holds every update since the start, and the one call site compiles a larger graph
every iteration with the same input shapes (the bare counters: see corpus.toml). That is
growth, not a changing constant. Fix: a sync per iteration (torch_xla.sync() after the update),
so each iteration runs one graph of one size, compiled once and reused."""

from itertools import count

import torch
import torch.nn.functional as F
import torch_xla

POLY_DEGREE = 4
MAX_BATCHES = 12


def make_features(x: torch.Tensor) -> torch.Tensor:
    """Columns x, x^2, x^3, x^4."""
    x = x.unsqueeze(1)
    return torch.cat([x**i for i in range(1, POLY_DEGREE + 1)], 1)


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    w_target = (torch.randn(POLY_DEGREE, 1) * 5).to(device)
    b_target = (torch.randn(1) * 5).to(device)

    def get_batch(batch_size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
        x = make_features(torch.randn(batch_size).to(device))
        return x, x.mm(w_target) + b_target.item()

    fc = torch.nn.Linear(POLY_DEGREE, 1).to(device)
    for batch_idx in count(1):
        batch_x, batch_y = get_batch()
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()  # expect: recompilation
        output.backward()
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad)
        if loss < 1e-3 or batch_idx == MAX_BATCHES:
            break
    print(f"loss {loss:.6f} after {batch_idx} batches")


if __name__ == "__main__":
    main()
