"""Gradient clipping with clip_grad_norm_ before the optimizer step. Healthy: the norm stays
on the device."""

import torch
import torch_xla
from torch import nn

STEPS = 10


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _step in range(STEPS):
        x = torch.randn(32, 64).to(device)
        loss = model(x).pow(2).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
