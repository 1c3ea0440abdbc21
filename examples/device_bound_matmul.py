"""Device-bound: a few large matmuls per step; the device, not the host, sets the pace.

Expected diagnosis: none. Tracing four ops takes microseconds; running them takes far longer.
"""

import torch
import torch_xla
from _common import arguments

SIZE = 1024


def main() -> None:
    args = arguments(default_steps=8)
    torch.manual_seed(args.seed)
    device = torch_xla.device()
    w = torch.randn(SIZE, SIZE, device=device) / SIZE**0.5
    x = torch.randn(SIZE, SIZE, device=device)
    torch_xla.sync()
    for _step in range(args.steps):
        for _ in range(4):
            x = torch.tanh(x @ w)
        torch_xla.sync()
    print(f"final mean {x.mean().item():.4f}")


if __name__ == "__main__":
    main()
