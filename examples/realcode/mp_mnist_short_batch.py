"""An MNIST-style CNN trained through MpDeviceLoader and xm.optimizer_step, as pytorch/xla's
test_train_mp_mnist.py does (https://github.com/pytorch/xla/blob/master/test/test_train_mp_mnist.py),
with a per-epoch loss accumulator kept on the device and printed at the end of each epoch.
Reproduced in our own words on synthetic 28x28 images: 100 samples in batches of 16 and no
drop_last, so each epoch ends with a batch of 4.

What is true (bare runtime): 3 epochs of 7 batches (21 iterations), 5 compilations: a set-up
graph flushed by the loader's first sync, two warm-up graphs (step 0; step 1 with the momentum
buffers), the batch of 4 (a new shape compiled at epoch 1's end and reused at the later ones)
and a graph compiled at the first sync of epoch 2's new MpDeviceLoader (then reused). That last
one is not the accumulator's doing: with drop_last=True it still happens, with or without the
accumulator and the per-epoch read (measured). So one recompilation finding is true, and only
one of the two late compiles is the user's: the batch size the loader yields
(16 -> 4), at the loop that takes batches. Fix: DataLoader(..., drop_last=True) (or pad the last
batch). Blaming `epoch_loss = torch.zeros(...)` is wrong."""

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 3


class MNIST(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.bn1 = nn.BatchNorm2d(10)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.bn2 = nn.BatchNorm2d(20)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = torch.relu(nn.functional.max_pool2d(self.conv1(x), 2))
        x = self.bn1(x)
        x = torch.relu(nn.functional.max_pool2d(self.conv2(x), 2))
        x = self.bn2(x)
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        return nn.functional.log_softmax(self.fc2(x), dim=1)


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    data = TensorDataset(torch.randn(100, 1, 28, 28), torch.randint(0, 10, (100,)))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model = MNIST().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    loss_fn = nn.NLLLoss()
    for epoch in range(EPOCHS):
        model.train()
        epoch_loss = torch.zeros((), device=device)
        for data, target in pl.MpDeviceLoader(loader, device):  # expect: recompilation
            optimizer.zero_grad()
            loss = loss_fn(model(data), target)
            loss.backward()
            xm.optimizer_step(optimizer)
            epoch_loss += loss.detach()
        print(f"epoch {epoch} mean loss {epoch_loss.item() / 7:.4f}")


if __name__ == "__main__":
    main()
