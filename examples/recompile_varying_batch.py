"""Recompilation: the batch size changes between steps, so every new size is a new graph.

Expected diagnosis: recompilation at the make_batch line (the sync is the cut site), dim 0 varies.
The fix is to pad or bucket batches to fixed sizes, or drop_last=True.
"""

import itertools

import torch
import torch_xla
from _common import MLP, arguments, make_batch

# Batch sizes as a dynamic-batching loader might produce them.
BATCH_SIZES = (256, 192, 136, 256, 72)


def main() -> None:
    args = arguments()
    torch.manual_seed(args.seed)
    device = torch_xla.device()
    model = MLP().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    sizes = itertools.cycle(BATCH_SIZES)
    for _step in range(args.steps):
        x, y = make_batch(next(sizes), device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
