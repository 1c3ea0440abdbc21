"""Gradient accumulation through torch_xla's own helper,
`torch_xla.experimental.gradient_accumulation.gradient_accumulation(train_step, iterable_tensors,
model)`, as its docstring and pytorch/xla's tests use it: the micro-batches stacked along a
leading dimension run in one XLA While loop, the backward inside it, then the optimizer step
and one `torch_xla.sync()` per step. Our own words: an MLP regression on random data.

What is true (bare runtime): 4 steps of 4 micro-batches. The helper materializes its inputs
before building the loop (torch_xla.sync() inside the helper when they are pending): a sync
on the device, no value copied to the host, so no host sync at all (TransferFromDevice
stays 0). The micro-batch loop is an XLA While loop: nothing is unrolled."""

import torch
import torch_xla
from torch import nn
from torch_xla.experimental.gradient_accumulation import gradient_accumulation

STEPS, MICRO, BATCH = 4, 4, 8


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_step(x, y):
        return nn.functional.mse_loss(model(x), y) / MICRO

    for _step in range(STEPS):
        x = torch.randn(MICRO, BATCH, 16, device=device)
        y = torch.randn(MICRO, BATCH, 1, device=device)
        loss = gradient_accumulation(train_step, (x, y), model)
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print("last loss pending:", loss.shape)


if __name__ == "__main__":
    main()
