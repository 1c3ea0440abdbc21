"""A Python int that changes every step used as an op argument (a rolling shift for data
augmentation): the shift is baked into the graph as a constant, so each new value compiles.

Expected: one recompilation finding, same inputs and a different graph, at the roll line."""

import torch
import torch_xla
from torch import nn

STEPS = 10


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    for step in range(STEPS):
        x = torch.randn(32, 64).to(device)
        x = torch.roll(x, shifts=step % 5, dims=1)  # expect: recompilation
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
