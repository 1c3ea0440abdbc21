"""The ModuleList model with scan_layers already applied: XLA compiles one block and loops
over the stacked weights. Healthy: no unrolled_loop."""

import torch
import torch_xla
from torch import nn
from torch_xla.experimental.scan_layers import scan_layers

STEPS = 5
WIDTH = 64


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x))


class Model(nn.Module):
    def __init__(self, depth: int = 12) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Block(WIDTH) for _ in range(depth)])
        self.head = nn.Linear(WIDTH, 1)

    def forward(self, x):
        return self.head(scan_layers(self.layers, x))


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = Model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for _step in range(STEPS):
        x = torch.randn(32, WIDTH).to(device)
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
