"""What a user pastes from a run with PT_XLA_DEBUG=1: only the
`pt-xla-profiler: Op(s) not lowered: aten::...` lines. The run is a torchvision MLP trained
with a robust loss that takes the batch median of the per-sample errors (torch.median has no
XLA lowering and runs on the CPU). The manifest runs this script bare with PT_XLA_DEBUG=1
and keeps only those lines; `xlaprof analyze` reads that file.

What is true: aten::median falls back to the CPU every step (its line is in this script, but
the pasted lines carry no Python frame, so no line can be known from them); nothing in the
paste counts compilations or steps."""

import torch
import torch_xla
import torchvision

STEPS = 6


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = torchvision.ops.MLP(32, [64, 1]).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    for _step in range(STEPS):
        x = torch.randn(32, 32).to(device)
        y = torch.randn(32, 1).to(device)
        errors = (model(x) - y).abs().flatten()
        loss = (errors - errors.median()).clamp(min=0).mean()  # expect: aten_fallback
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
