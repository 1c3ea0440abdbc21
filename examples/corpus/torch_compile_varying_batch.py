"""torch.compile(model, backend="openxla") fed batches of 16, 12, 9 and 5 rows (a dynamic-
batching loader). Dynamo recompiles for each new size until it marks the dimension dynamic.

Expected: one recompilation finding for the changing batch size, located at the line that
makes the batch, carrying dynamo's reasons (size mismatch at index 0)."""

import torch
import torch_xla
from torch import nn

SIZES = (16, 12, 9, 5)


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    compiled = torch.compile(model, backend="openxla")
    data = torch.randn(64, 32)
    for step in range(8):
        size = SIZES[step % len(SIZES)]
        x = data[:size].to(device)  # expect: recompilation
        with torch.no_grad():
            out = compiled(x)
        torch_xla.sync()
    print(f"final output mean {out.mean().item():.4f}")


if __name__ == "__main__":
    main()
