"""A timm-style training loop with random erasing applied to the batch on the device, as timm's
train.py does with its `RandomErasing(device=...)` after the loader
(https://github.com/huggingface/pytorch-image-models/blob/main/train.py): here torchvision's
`transforms.RandomErasing`, which draws the erased box's position and size on the host for
every call. Our own words: a small CNN on random 32x32 images, SGD, a sync per step.

What is true (bare runtime): 8 steps; each step erases a box whose bounds and size are drawn
anew, so the box's slice bounds (and its shape) are constants baked into the step's graph:
a new graph every step. It is the transform's own random bounds, not the data's shapes:
keeping them fixed or passing them as a device tensor cannot work, since the box's sizes
vary too. The fix names the transform: erase on the host, in the data loader's workers
(before the batch is moved to the device), or with a fixed-shape mask built on the device
(a box mask from device-side random bounds compared against a coordinate grid)."""

import torch
import torch_xla
from torch import nn
from torchvision import transforms

STEPS = 8


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 10),
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    erase = transforms.RandomErasing(p=1.0, scale=(0.05, 0.3))
    for _step in range(STEPS):
        images = torch.randn(4, 3, 32, 32).to(device)
        labels = torch.randint(0, 10, (4,)).to(device)
        images = erase(images)  # expect: recompilation
        loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()


if __name__ == "__main__":
    main()
