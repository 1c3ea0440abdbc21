"""A Python float that changes every step (a hand-written loss-weight ramp). Healthy on
torch_xla 2.9: Python scalars travel as device data, so no recompilation."""

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
        weight = 1.0 - 0.05 * step
        x = torch.randn(32, 64).to(device)
        out = model(x)
        loss = weight * out.pow(2).mean() + (1.0 - weight) * out.abs().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
