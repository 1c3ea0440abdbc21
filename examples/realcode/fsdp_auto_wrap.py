"""torch_xla's FSDP with auto-wrapping, the way pytorch/xla's FSDP MNIST test sets it up
(https://github.com/pytorch/xla/blob/master/test/test_train_mp_mnist_fsdp_with_ckpt.py):
`XlaFullyShardedDataParallel(model, auto_wrap_policy=size_based_auto_wrap_policy)` wraps each
large enough submodule, then a plain training loop with a sync per step. Our own words, an MLP
of three Linear layers of different sizes, one process on the CPU device.

What is true (bare runtime): 10 syncs, 5 compiles, 8 executions for 6 training steps. The
wrapper's constructor shards each wrapped submodule's parameters with a sync of its own (the
first syncs, one graph per parameter shape: [64, 32], [128, 64], [16, 128]), once, before
training. Those graphs differ by the submodules' shapes, not by anything a step feeds them:
they are set-up, no recompilation, and padding or bucketing has nothing to fix. The training
steps compile their graphs in the first two steps (warm-up) and reuse them."""

import functools

import torch
import torch_xla
from torch import nn
from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
from torch_xla.distributed.fsdp.wrap import size_based_auto_wrap_policy

STEPS = 6


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    layers = [nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 16)]
    policy = functools.partial(size_based_auto_wrap_policy, min_num_params=1000)
    model = FSDP(nn.Sequential(*layers).to(device), auto_wrap_policy=policy)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _step in range(STEPS):
        x = torch.randn(8, 32, device=device)
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()


if __name__ == "__main__":
    main()
