"""A healthy training loop: fixed shapes, no host reads inside the loop, everything lowered.

Expected diagnosis: no findings. It compiles at step 0 and again at step 1 (Adam's state
appears), then runs the cached graph every step.
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
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
