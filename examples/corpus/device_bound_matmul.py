"""Few, large matmuls per step: the device (here the CPU backend) does the work and the host
traces a handful of ops. Healthy: no tracing_bound."""

import torch
import torch_xla

STEPS = 8
SIZE = 768


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    w1 = torch.randn(SIZE, SIZE, device=device, requires_grad=True)
    w2 = torch.randn(SIZE, SIZE, device=device, requires_grad=True)
    optimizer = torch.optim.SGD([w1, w2], lr=1e-6)
    for _step in range(STEPS):
        x = torch.randn(SIZE, SIZE).to(device)
        loss = (torch.tanh(x @ w1) @ w2).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
