"""Factories for `xlaprof bench` (TARGET = examples/bench_targets.py:NAME).

Each returns (model, example_batch). Small on purpose: the tests run them on the CPU runtime.
"""

import torch
from torch import nn
from unrolled_layers import WIDTH, Block, Stack


def small_stack() -> tuple[nn.Module, torch.Tensor]:
    """Eight identical blocks in a ModuleList applied in a for loop."""
    return Stack(width=32, depth=8), torch.randn(16, 32)


def stack(depth: int = 32) -> tuple[nn.Module, torch.Tensor]:
    """The unrolled_layers model at a chosen depth (benchmarks use 32 and 64)."""
    return Stack(width=WIDTH, depth=depth), torch.randn(32, WIDTH)


def stack64() -> tuple[nn.Module, torch.Tensor]:
    return stack(64)


class SwappedBlock(Block):
    """Same parameters as Block, different computation: not homogeneous with it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - self.down(torch.relu(self.up(self.norm(x))))


def mixed_stack() -> tuple[nn.Module, torch.Tensor]:
    """A ModuleList mixing Block and SwappedBlock: scan_layers must not be applied to it."""
    model = Stack(width=32, depth=6)
    model.blocks[3] = SwappedBlock(32)
    return model, torch.randn(16, 32)


def llama_decoder():  # type: ignore[no-untyped-def]
    """transformers' LlamaForCausalLM (8 decoder layers, tiny random-init config), trained
    without a key-value cache: its layers take the state positionally and the mask, rotary
    position embeddings and position ids as keywords. Returns (model, token ids, loss_fn)."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=8,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        use_cache=False,  # a cache object handed to every layer cannot be scanned
    )
    return (
        LlamaForCausalLM(config),
        torch.randint(0, config.vocab_size, (4, 32)),
        lambda output: output.logits.float().pow(2).mean(),
    )
