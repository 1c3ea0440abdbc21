"""A running metric that uses torch.bincount on the predictions each step: bincount has no
XLA lowering here, so it runs on the CPU with a copy each way.

Expected: aten_fallback (aten::bincount) at the bincount line."""

import torch
import torch_xla
from torch import nn

STEPS = 8


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 5)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    histogram = torch.zeros(5, dtype=torch.long, device=device)
    for _step in range(STEPS):
        x = torch.randn(32, 32).to(device)
        y = torch.randint(0, 5, (32,)).to(device)
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        histogram += torch.bincount(logits.argmax(dim=1), minlength=5)  # expect: aten_fallback
        torch_xla.sync()
    print(histogram.cpu().tolist())


if __name__ == "__main__":
    main()
