"""A fixed-shape MLP regression loop with Adam, one sync per step, no host reads. Healthy."""

import torch
import torch_xla
from torch import nn

STEPS = 12


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _step in range(STEPS):
        x = torch.randn(64, 64)
        y = x[:, :1] * 0.5
        x, y = x.to(device), y.to(device)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
