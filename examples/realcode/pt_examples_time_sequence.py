"""pytorch/examples' time-sequence prediction on the XLA device: two stacked nn.LSTMCell
applied in a Python loop over the time steps (`for input_t in input.split(1, dim=1)`), trained
with torch.optim.LBFGS and a closure, one sync after each optimizer step.

Source: pytorch/examples time_sequence_prediction/train.py (Sequence, LBFGS(lr=0.8), closure),
reproduced in our own words on generated sine waves (the example's generate_sine_wave.py), 4
LBFGS steps of max_iter=4, sequences of 24 points.

What is true (bare runtime): the time loop unrolls into 24 copies of the two cells in forward
(and backward) in every graph: an unrolled time loop at the loop over the time steps, which
torch_xla.experimental.scan can run. LBFGS reads the loss and its convergence tests inside
optimizer.step (torch/optim/lbfgs.py: `float(loss)`, tensor comparisons in `if`), each read
running the graph traced so far; see corpus.toml for the bare counters."""

import math

import torch
import torch.nn as nn
import torch_xla

STEPS = 4
POINTS = 24
HIDDEN = 16


class Sequence(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, HIDDEN)
        self.lstm2 = nn.LSTMCell(HIDDEN, HIDDEN)
        self.linear = nn.Linear(HIDDEN, 1)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        outputs = []
        batch = input.size(0)
        h_t = torch.zeros(batch, HIDDEN, device=input.device)
        c_t = torch.zeros(batch, HIDDEN, device=input.device)
        h_t2 = torch.zeros(batch, HIDDEN, device=input.device)
        c_t2 = torch.zeros(batch, HIDDEN, device=input.device)
        for input_t in input.split(1, dim=1):  # expect: unrolled_loop
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            outputs.append(self.linear(h_t2))
        return torch.cat(outputs, dim=1)


def sine_waves(count: int, length: int) -> torch.Tensor:
    shift = torch.randint(-80, 80, (count, 1)).float()
    x = torch.arange(length).float().unsqueeze(0) + shift
    return torch.sin(x / 20.0 / math.pi)


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    data = sine_waves(8, POINTS + 1)
    input = data[:, :-1].to(device)
    target = data[:, 1:].to(device)
    seq = Sequence().to(device)
    criterion = nn.MSELoss()
    optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=4)

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = criterion(seq(input), target)
        loss.backward()
        return loss

    for _step in range(STEPS):
        loss = optimizer.step(closure)
        torch_xla.sync()
    print(f"loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
