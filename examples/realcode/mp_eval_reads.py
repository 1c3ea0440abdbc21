"""A classifier trained and evaluated through MpDeviceLoader, each loop reading its loss per
batch, the way many first torch_xla scripts do: `train_one_epoch()` adds `loss.item()` to a
running total after `xm.optimizer_step`, and a separate `evaluate()` adds
`criterion(model(x), y).item()` for every validation batch. Our own words, synthetic data.

What is true (bare runtime): 3 epochs of 8 training batches and 3 evaluations of 3 validation
batches. MpDeviceLoader syncs once per batch, so every loop iteration is its own step, and each
loop's `.item()` reads once per step: 24 reads in training, 9 in evaluation, 33 in all
(aten::_local_scalar_dense). Two read sites, one per function, each once per iteration of a
loop over data, each waiting for that batch's graph; the evaluation's runs in 9 of 33 steps,
which is no occasional log line (every one of its loop's iterations reads). Fix for both: keep
the running total on the device (`total += loss.detach()`) and read it once per epoch."""

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EPOCHS, BATCH = 3, 16


def train_one_epoch(model, loader, optimizer, criterion):
    model.train()
    running = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        xm.optimizer_step(optimizer)
        running += loss.item()  # expect: host_sync
    return running


def evaluate(model, loader, criterion):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            total += criterion(model(x), y).item()  # expect: host_sync
    return total


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    train_set = TensorDataset(torch.randn(8 * BATCH, 32), torch.randint(0, 4, (8 * BATCH,)))
    val_set = TensorDataset(torch.randn(3 * BATCH, 32), torch.randint(0, 4, (3 * BATCH,)))
    train_loader = DataLoader(train_set, batch_size=BATCH, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=BATCH, drop_last=True)
    for epoch in range(EPOCHS):
        train_loss = train_one_epoch(
            model, pl.MpDeviceLoader(train_loader, device), optimizer, criterion
        )
        val_loss = evaluate(model, pl.MpDeviceLoader(val_loader, device), criterion)
        print(f"epoch {epoch} train {train_loss:.3f} val {val_loss:.3f}")


if __name__ == "__main__":
    main()
