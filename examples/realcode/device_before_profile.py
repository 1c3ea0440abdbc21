"""The README's own pattern for profiling from Python: the device and the model are made first,
then the training loop runs inside `with xlaprof.profile(out):`. The model is a stack of 12
blocks from transformers' building blocks (LlamaMLP), held in a ModuleList and looped over in
forward. The profile block is entered only when $REALCODE_PROFILE_OUT is set (the corpus judge
sets it; the bare-runtime measurement leaves it unset).

What is true: an unrolled stack of 12 identical Block at the `for layer in self.layers` line,
exactly as when the same model is made inside the block. Nothing about the script should lose
the graphs that finding needs: if graph capture cannot work after torch_xla.device(), the run
must say so."""

import contextlib
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
from torch import nn
from transformers.models.llama.modeling_llama import LlamaConfig, LlamaMLP, LlamaRMSNorm

STEPS = 5


class Block(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.norm = LlamaRMSNorm(config.hidden_size)
        self.mlp = LlamaMLP(config)

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Stack(nn.Module):
    def __init__(self, config: LlamaConfig, depth: int = 12) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Block(config) for _ in range(depth)])
        self.head = nn.Linear(config.hidden_size, 1)

    def forward(self, x):
        for layer in self.layers:  # expect: unrolled_loop
            x = layer(x)
        return self.head(x)


def profiling():
    out = os.environ.get("REALCODE_PROFILE_OUT")
    if not out:
        return contextlib.nullcontext()
    import xlaprof

    return xlaprof.profile(out)


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = Stack(LlamaConfig(hidden_size=64, intermediate_size=128)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with profiling():
        for _step in range(STEPS):
            x = torch.randn(16, 64).to(device)
            loss = model(x).pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
