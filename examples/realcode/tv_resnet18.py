"""A torchvision ResNet-18 (random init, 10 classes) image-classification step on 32x32
synthetic images, SGD with momentum and a StepLR schedule, the loop of the torchvision
classification reference (https://github.com/pytorch/vision/blob/main/references/classification/train.py)
in our own words, with xm.optimizer_step and a sync per step.

What is true (bare runtime): a healthy fixed-shape step: 2 warm-up compilations and then every
step reuses the cached graph. A control: no finding is true here."""

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torchvision
from torch import nn

STEPS = 6
BATCH = 8


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = torchvision.models.resnet18(num_classes=10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.1)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    model.train()
    for _step in range(STEPS):
        images = torch.randn(BATCH, 3, 32, 32).to(device)
        target = torch.randint(0, 10, (BATCH,)).to(device)
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        xm.optimizer_step(optimizer)
        scheduler.step()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
