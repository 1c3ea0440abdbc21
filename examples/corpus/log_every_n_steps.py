"""Logging the loss with .item() every 10 steps through the logging module: two reads in 20
steps. Healthy: reading now and then is normal (no host_sync finding)."""

import logging

import torch
import torch_xla
from torch import nn

STEPS = 20
LOG_EVERY = 10
log = logging.getLogger("train")


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    for step in range(STEPS):
        x = torch.randn(32, 64).to(device)
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
        if step % LOG_EVERY == 0:
            log.info("step %d loss %.4f", step, loss.item())


if __name__ == "__main__":
    main()
