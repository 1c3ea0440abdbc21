"""Host sync: the loss is read with `.item()` every step for logging.

Expected diagnosis: host_sync at the `.item()` line. Each read stalls the host until the device
has finished the step. The fix is to log every N steps or through xm.add_step_closure.
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
    history = []
    for _step in range(args.steps):
        x, y = make_batch(args.batch, device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        history.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {history[-1]:.4f}")


if __name__ == "__main__":
    main()
