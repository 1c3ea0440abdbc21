"""A user who already dumps XLA's HLO with their own `XLA_FLAGS=--xla_dump_to=DIR` (the
manifest sets it for this run) profiles a healthy step of torchvision's MLP block
(torchvision.ops.MLP).

What is true: the user's flag must keep working under xlaprof (the folder fills with HLO dumps
as without xlaprof), and the step is healthy: no finding."""

import torch
import torch_xla
import torchvision
from torch import nn

STEPS = 5


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = torchvision.ops.MLP(64, [256, 256, 10], dropout=0.1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _step in range(STEPS):
        features = torch.randn(32, 64).to(device)
        target = torch.randint(0, 10, (32,)).to(device)
        loss = nn.functional.cross_entropy(model(features), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
