"""The model of unrolled_layers.py with its blocks run through scan_layers.

Expected diagnosis: none. XLA compiles one Block and loops over the stacked parameters.
"""

import torch
from _common import arguments
from torch_xla.experimental.scan_layers import scan_layers
from unrolled_layers import Stack, train


class ScannedStack(Stack):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(scan_layers(self.blocks, x))


def main() -> None:
    args = arguments(default_steps=4)
    torch.manual_seed(args.seed)
    print(f"final loss {train(ScannedStack(), args.steps):.4f}")


if __name__ == "__main__":
    main()
