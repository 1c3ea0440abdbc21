"""The classic PyTorch/XLA loop: MpDeviceLoader drives the steps (it syncs at each batch) and
xm.optimizer_step applies the update; the loss is added to a device tensor, read once at the
end. Healthy."""

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    data = TensorDataset(torch.randn(256, 64), torch.randn(256, 1))
    loader = DataLoader(data, batch_size=32, drop_last=True)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    total = torch.zeros((), device=device)
    for x, y in pl.MpDeviceLoader(loader, device):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        xm.optimizer_step(optimizer)
        total += loss.detach()
    print(f"mean loss {total.item() / len(loader):.4f}")


if __name__ == "__main__":
    main()
