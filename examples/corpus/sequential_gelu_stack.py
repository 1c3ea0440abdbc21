"""A plain nn.Sequential of 16 (Linear, GELU) blocks, called as model(x). No line of user code
is inside a block: every op comes from torch/nn/modules.

Expected: unrolled_loop located at the call of the Sequential, naming the stack."""

import torch
import torch_xla
from torch import nn

STEPS = 5
WIDTH = 64
DEPTH = 16


def make_model() -> nn.Sequential:
    layers = []
    for _ in range(DEPTH):
        layers += [nn.Linear(WIDTH, WIDTH), nn.GELU()]
    return nn.Sequential(*layers)


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = make_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for _step in range(STEPS):
        x = torch.randn(32, WIDTH).to(device)
        loss = model(x).pow(2).mean()  # expect: unrolled_loop
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
