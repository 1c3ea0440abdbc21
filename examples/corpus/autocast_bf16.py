"""Mixed precision: the forward pass under torch.autocast("xla", dtype=torch.bfloat16).
Healthy: no findings."""

import torch
import torch_xla
from torch import nn

STEPS = 10


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 8)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _step in range(STEPS):
        x = torch.randn(32, 128).to(device)
        y = torch.randint(0, 8, (32,)).to(device)
        with torch.autocast("xla", dtype=torch.bfloat16):
            logits = model(x)
        loss = nn.functional.cross_entropy(logits.float(), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
