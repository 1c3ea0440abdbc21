"""A training step that already follows the torch_xla guide's advice: the step is wrapped in
`torch_xla.compile` and batches arrive through `MpDeviceLoader`. Its loss is a per-sample
Python loop (a per-token weighted loss written sample by sample, as ported research code often
is), so thousands of tiny ops are traced every step for little device work. The model is
torchvision's MLP block (torchvision.ops.MLP).

What is true: tracing-bound, the host CPU going to the per-element loss line. The advice must
fit the script: it already compiles the step with torch_xla.compile (which traces every call
all the same) and already feeds MpDeviceLoader; the change worth making is to vectorize the
loss."""

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torchvision
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 2


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = torchvision.ops.MLP(16, [32, 16]).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = TensorDataset(torch.randn(64, 16), torch.randn(64, 16))
    loader = DataLoader(data, batch_size=16, drop_last=True)

    def train_step(x, y):
        out = model(x)
        loss = torch.zeros((), device=device)
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                weight = (j + 1) / out.shape[1]
                loss = loss + (out[i, j] - y[i, j]).abs() * weight  # expect: tracing_bound
        loss.backward()
        xm.optimizer_step(optimizer)
        optimizer.zero_grad()
        return loss

    compiled_step = torch_xla.compile(train_step)
    for _epoch in range(EPOCHS):
        for x, y in pl.MpDeviceLoader(loader, device):
            loss = compiled_step(x, y)
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
