"""Printing the loss tensor every step, after the sync. Each print copies the value to the
host and waits for the device.

Expected: host_sync at the print line; no recompilation."""

import torch
import torch_xla
from torch import nn

STEPS = 12


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    for step in range(STEPS):
        x = torch.randn(32, 64).to(device)
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
        print(f"step {step} loss {loss}")  # expect: host_sync


if __name__ == "__main__":
    main()
