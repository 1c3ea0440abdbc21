"""`.item()` on the loss before the step's mark_step: the read forces the forward graph to run
on its own, and the rest of the step runs in a second graph (two executions per step).

Expected: host_sync at the .item() line, saying the read splits the step's graph."""

import torch
import torch_xla
import torch_xla.core.xla_model as xm
from torch import nn

STEPS = 12


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _step in range(STEPS):
        x = torch.randn(32, 64).to(device)
        loss = model(x).pow(2).mean()
        losses.append(loss.item())  # expect: host_sync
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        xm.mark_step()
    print(f"mean loss {sum(losses) / len(losses):.4f}")


if __name__ == "__main__":
    main()
