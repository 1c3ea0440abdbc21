"""accelerate's Accelerator on the XLA device (DistributedType.XLA on the CPU PJRT device):
a torchvision ResNet-18 with SGD, the DataLoader prepared by accelerate (it becomes an
MpDeviceLoaderWrapper, which syncs each batch), drop_last=True, 2 epochs of 4 batches, loss
logged through accelerator.print once per epoch. The loop of accelerate's examples
(https://github.com/huggingface/accelerate/blob/main/examples/nlp_example.py) in our own words.

What is true (bare runtime): a healthy fixed-shape loop; 8 training iterations."""

import torch
import torch_xla  # noqa: F401  (accelerate picks XLA when it is importable)
import torchvision
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 2


def main() -> None:
    torch.manual_seed(0)
    accelerator = Accelerator()
    model = torchvision.models.resnet18(num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = TensorDataset(torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,)))
    loader = DataLoader(data, batch_size=16, shuffle=True, drop_last=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for epoch in range(EPOCHS):
        model.train()
        for images, target in loader:
            loss = torch.nn.functional.cross_entropy(model(images), target)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        accelerator.print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
