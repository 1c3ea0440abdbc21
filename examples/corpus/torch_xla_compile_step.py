"""The recommended style: the training step wrapped in torch_xla.compile, AdamW. Healthy:
torch_xla.compile syncs before and after the step; optimizer state appears on the first
calls. No recompilation, no tracing_bound."""

import torch
import torch_xla
from torch import nn

STEPS = 12


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def train_step(x, y):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    compiled_step = torch_xla.compile(train_step)
    for _step in range(STEPS):
        x = torch.randn(64, 128).to(device)
        y = torch.randn(64, 1).to(device)
        loss = compiled_step(x, y)
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
