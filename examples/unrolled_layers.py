"""Unrolled loop: 24 identical blocks applied in a Python for loop, traced 24 times.

Expected diagnosis: unrolled_loop at the `for blk in self.blocks` line, naming self.blocks (an
nn.ModuleList of Block). The fix is scan_layers (see scanned_layers.py for the same model).
"""

import torch
import torch_xla
from _common import arguments
from torch import nn

WIDTH = 128
DEPTH = 24


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Stack(nn.Module):
    def __init__(self, width: int = WIDTH, depth: int = DEPTH) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


def train(model: nn.Module, steps: int) -> float:
    device = torch_xla.device()
    model = model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for _step in range(steps):
        x = torch.randn(32, WIDTH).to(device)
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    return loss.item()


def main() -> None:
    args = arguments(default_steps=4)
    torch.manual_seed(args.seed)
    print(f"final loss {train(Stack(), args.steps):.4f}")


if __name__ == "__main__":
    main()
