"""A training script gated in CI (docs/ci.md): fixed shapes, no host reads inside the loop.

Profile a few steps and check them against the budgets in ``ci_check.toml``::

    xlaprof run --max-steps 8 --out runs/ci -- python examples/ci_check.py
    xlaprof check runs/ci --budget examples/ci_check.toml

``CI_CHECK_LOADER_DELAY_S=0.5`` makes every batch arrive that much later, as a slow input
pipeline would. Nothing else changes (same graphs, no host sync), so only a comparison with a
baseline run catches it::

    export CI_CHECK_LOADER_DELAY_S=0.5
    xlaprof run --max-steps 8 --out runs/slow -- python examples/ci_check.py
    xlaprof check runs/slow --baseline runs/ci --max-step-time-ratio 1.5
"""

import os
import time

import torch
import torch_xla
from _common import MLP, arguments, make_batch

LOADER_DELAY_S = float(os.environ.get("CI_CHECK_LOADER_DELAY_S", "0"))


def main() -> None:
    args = arguments()
    torch.manual_seed(args.seed)
    device = torch_xla.device()
    model = MLP().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _step in range(args.steps):
        time.sleep(LOADER_DELAY_S)  # waiting for the input pipeline
        x, y = make_batch(args.batch, device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
