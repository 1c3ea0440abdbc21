"""A DCGAN trained the way pytorch/examples' dcgan does
(https://github.com/pytorch/examples/blob/main/dcgan/main.py): per batch, the discriminator on
real then fake images, the generator against the updated discriminator, with `D(x)`, `D(G(z))`
read by `output.mean().item()` between the backward passes and the losses read for the log
line. Reproduced in our own words at 16x16 pixels with a tiny generator and discriminator, on
36 synthetic images in batches of 8 with no drop_last (4 full batches and a short one of 4 per
epoch), a `torch_xla.sync()` at the end of each iteration; 3 epochs, 15 iterations.

What is true (bare runtime): 15 compilations. The first iteration compiles the warm-up graphs
(the step's graphs before the optimizers' state exists, then with it); the mid-step `.item()`
reads split each step into several graphs, each compiled once and then reused; the short last
batch (8 -> 4) compiles its own set of those graphs at the end of epoch 1, reused in epochs 2
and 3. Only the short batch's compiles are a recompilation a fix removes (drop_last=True, at
the DataLoader); the split-off graphs are the reads' doing (host_sync), and warm-up is no
problem. The finding belongs at the loop that takes the batches (the loader yields them)."""

import torch
import torch_xla
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

NZ, NGF, NDF, EPOCHS = 8, 8, 8, 3


class Generator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NZ, NGF * 4, 4, 1, 0, bias=False),
            nn.BatchNorm2d(NGF * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 4, NGF * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(NGF * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 2, 3, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(3, NDF, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(NDF * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, x):
        return self.main(x).view(-1, 1).squeeze(1)


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    images = torch.rand(36, 3, 16, 16) * 2 - 1
    loader = DataLoader(TensorDataset(images), batch_size=8, shuffle=True)
    net_g, net_d = Generator().to(device), Discriminator().to(device)
    criterion = nn.BCELoss()
    optimizer_d = torch.optim.Adam(net_d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizer_g = torch.optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    for epoch in range(EPOCHS):
        for i, (real_cpu,) in enumerate(loader):  # expect: recompilation
            real = real_cpu.to(device)
            batch_size = real.size(0)
            net_d.zero_grad()
            label = torch.full((batch_size,), 1.0, device=device)
            output = net_d(real)
            err_d_real = criterion(output, label)
            err_d_real.backward()
            d_x = output.mean().item()
            noise = torch.randn(batch_size, NZ, 1, 1, device=device)
            fake = net_g(noise)
            label.fill_(0.0)
            output = net_d(fake.detach())
            err_d_fake = criterion(output, label)
            err_d_fake.backward()
            d_g_z1 = output.mean().item()
            err_d = err_d_real + err_d_fake
            optimizer_d.step()
            net_g.zero_grad()
            label.fill_(1.0)
            output = net_d(fake)
            err_g = criterion(output, label)
            err_g.backward()
            d_g_z2 = output.mean().item()
            optimizer_g.step()
            torch_xla.sync()
            print(
                f"[{epoch}/{EPOCHS}][{i}/{len(loader)}] Loss_D {err_d.item():.4f} "
                f"Loss_G {err_g.item():.4f} D(x) {d_x:.4f} D(G(z)) {d_g_z1:.4f} / {d_g_z2:.4f}"
            )


if __name__ == "__main__":
    main()
