"""A recurrent cell applied over 24 time steps in a Python loop: the same cell, with the same
parameters, traced 24 times into the step's graph.

Expected: unrolled_loop located at the time loop (not inside the cell), suggesting
torch_xla.experimental.scan.scan over the carried hidden state, not scan_layers/bench scan."""

import torch
import torch_xla
from torch import nn

STEPS = 6
TIME = 24


class Recurrent(nn.Module):
    def __init__(self, features: int = 32, hidden: int = 64) -> None:
        super().__init__()
        self.cell = nn.GRUCell(features, hidden)
        self.head = nn.Linear(hidden, 1)

    def forward(self, sequence):
        h = torch.zeros(sequence.shape[0], self.cell.hidden_size, device=sequence.device)
        for t in range(sequence.shape[1]):  # expect: unrolled_loop
            h = self.cell(sequence[:, t], h)
        return self.head(h)


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = Recurrent().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    for _step in range(STEPS):
        sequence = torch.randn(8, TIME, 32).to(device)
        loss = model(sequence).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
