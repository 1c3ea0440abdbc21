"""Shared pieces of the example training scripts: a small MLP regression task on the XLA device.

The examples are real (they train), tiny (seconds on the CPU PJRT device) and each shows one
problem. They are what `make demo`, the sample traces and the tests profile.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

FEATURES = 256
HIDDEN = 1024


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU()
        )
        self.head = nn.Linear(HIDDEN, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.net(x))


def arguments(default_steps: int = 12) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=default_steps)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def make_batch(batch: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """A synthetic regression batch made on the host and copied over, as a loader would."""
    x = torch.randn(batch, FEATURES)
    y = x[:, :1] * 0.5 + 0.1
    return x.to(device), y.to(device)
