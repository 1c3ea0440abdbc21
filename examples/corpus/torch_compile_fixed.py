"""torch.compile(model, backend="openxla") on fixed-size batches: compiled once, replayed.
Healthy: no findings."""

import torch
import torch_xla
from torch import nn

STEPS = 8


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    compiled = torch.compile(model, backend="openxla")
    for _step in range(STEPS):
        x = torch.randn(16, 32).to(device)
        with torch.no_grad():
            out = compiled(x)
        torch_xla.sync()
    print(f"final output mean {out.mean().item():.4f}")


if __name__ == "__main__":
    main()
