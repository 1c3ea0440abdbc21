"""DataLoader + MpDeviceLoader without drop_last: 100 samples in batches of 32 leave a last
batch of 4, a new shape once per epoch. The loss is logged once per epoch.

Expected: one recompilation finding (the batch dimension varies 32 -> 4), located at the loop
that takes batches from the loader; no second finding for the same cause at the log line."""

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
    loader = DataLoader(data, batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 4)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(EPOCHS):
        for x, y in pl.MpDeviceLoader(loader, device):  # expect: recompilation
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            xm.optimizer_step(optimizer)
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
