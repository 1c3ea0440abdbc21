"""CPU fallback: the loss is normalised by `torch.median`, which has no XLA lowering.

Expected diagnosis: aten_fallback for aten::median at the `torch.median` line. Every step the
tensor goes device→host, the median runs on the CPU, and the result comes back.
"""

import torch
import torch_xla
from _common import MLP, arguments, make_batch


def main() -> None:
    args = arguments()
    torch.manual_seed(args.seed)
    device = torch_xla.device()
    model = MLP().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _step in range(args.steps):
        x, y = make_batch(args.batch, device)
        error = (model(x) - y).abs()
        scale = torch.median(error.detach()) + 1e-6
        loss = (error / scale).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
