"""DataLoader + MpDeviceLoader with drop_last=True: every batch has the same shape. Healthy."""

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 3


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    data = TensorDataset(torch.randn(100, 64), torch.randint(0, 4, (100,)))
    loader = DataLoader(data, batch_size=32, shuffle=True, drop_last=True)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 4)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _epoch in range(EPOCHS):
        for x, y in pl.MpDeviceLoader(loader, device):
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            xm.optimizer_step(optimizer)
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
