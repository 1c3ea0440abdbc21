"""torch_xla.compile(train_step) fed a batch whose size changes every few steps (the last
batch of each epoch is shorter). Expected: one recompilation finding for the batch dimension,
located at the line that makes the batch."""

import torch
import torch_xla
from torch import nn

SIZES = (32, 32, 32, 20)


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)

    def train_step(x):
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        return loss

    step_fn = torch_xla.compile(train_step)
    for step in range(12):
        x = torch.randn(SIZES[step % len(SIZES)], 64).to(device)  # expect: recompilation
        loss = step_fn(x)
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
