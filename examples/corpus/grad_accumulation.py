"""Gradient accumulation: 4 micro-batches per optimizer step, one sync per micro-batch.
Healthy: two graphs (accumulate, accumulate+step) plus warm-up, no recompilation."""

import torch
import torch_xla
from torch import nn

STEPS = 6
ACCUMULATE = 4


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _step in range(STEPS):
        for _micro in range(ACCUMULATE):
            x = torch.randn(32, 64).to(device)
            loss = model(x).pow(2).mean() / ACCUMULATE
            loss.backward()
            torch_xla.sync()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
