"""Recompilation from a data-dependent shape: the rows kept by a mask differ every step.

Expected diagnosis: recompilation explained as a data-dependent shape (aten::nonzero at the
masking line). The fix is to keep shapes fixed: multiply by the mask instead of selecting.
"""

import torch
import torch_xla
from _common import FEATURES, MLP, arguments


def main() -> None:
    args = arguments(default_steps=8)
    torch.manual_seed(args.seed)
    device = torch_xla.device()
    model = MLP().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for _step in range(args.steps):
        x = torch.randn(64, FEATURES).to(device)
        keep = torch.nonzero(x[:, 0] > 0).squeeze(1)
        loss = model(x[keep]).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
