"""A per-sample loss written as a Python loop over the batch and over features: thousands of
tiny ops traced per step for a small amount of device work.

Expected: tracing_bound, located at the per-element line where the host CPU goes."""

import torch
import torch_xla

STEPS = 8


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    w = torch.randn(16, device=device, requires_grad=True)
    optimizer = torch.optim.SGD([w], lr=1e-3)
    for _step in range(STEPS):
        x = torch.randn(16, 16).to(device)
        loss = torch.zeros((), device=device)
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                loss = loss + (x[i, j] * w[j]).tanh() ** 2  # expect: tracing_bound
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
