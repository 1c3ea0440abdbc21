"""pytorch/xla's SPMD data-parallel training: `xr.use_spmd()`, a 1-D device mesh over every
device, the batch sharded along its first dimension through MpDeviceLoader's `input_sharding`,
a torchvision ResNet-18 (32x32 inputs), SGD, one `xm.mark_step()` a step from the loader.

Source: pytorch/xla examples/data_parallel/train_resnet_spmd_data_parallel.py and
docs/source/perf/spmd_basic.md (Mesh, ShardingSpec, MpDeviceLoader(input_sharding=...)),
reproduced in our own words. On the CPU PJRT device the mesh has one device: the sharding is
trivial but the SPMD partitioner and the sharded loader run as on a TPU.

What is true (bare runtime): a healthy SPMD step: fixed shapes, no reads, one graph compiled
after the first step and reused. No recompilation, host sync, fallback, unrolled loop or graph
break."""

import numpy as np
import torch
import torch.nn.functional as F
import torch_xla
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
from torch.utils.data import DataLoader, TensorDataset
from torchvision.models import resnet18

BATCH = 8
ITERATIONS = 6


def main() -> None:
    xr.use_spmd()
    torch.manual_seed(0)
    device = torch_xla.device()
    devices = xr.global_runtime_device_count()
    mesh = xs.Mesh(np.arange(devices), (devices, 1), ("data", "model"))
    images = torch.randn(BATCH * ITERATIONS, 3, 32, 32)
    labels = torch.randint(0, 10, (BATCH * ITERATIONS,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=BATCH, drop_last=True)
    train_loader = pl.MpDeviceLoader(
        loader, device, input_sharding=xs.ShardingSpec(mesh, ("data", None, None, None))
    )
    model = resnet18(num_classes=10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model.train()
    for data, target in train_loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
