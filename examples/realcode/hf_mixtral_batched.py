"""The Mixtral MoE step of hf_mixtral_moe.py with experts_implementation="batched_mm": every
expert's weights gathered per token with fixed shapes, no data-dependent indexing.

What is true (bare runtime): a healthy fixed-shape step: 2 warm-up compilations, one execution
a step, no fallback, no host read but the final loss. A control for the MoE set-up."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
import torch_xla.core.xla_model as xm
from transformers import MixtralConfig, MixtralForCausalLM

STEPS = 6
BATCH, LENGTH = 2, 16


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    config = MixtralConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=64,
        experts_implementation="batched_mm",
    )
    model = MixtralForCausalLM(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _step in range(STEPS):
        input_ids = torch.randint(0, 512, (BATCH, LENGTH)).to(device)
        loss = model(input_ids=input_ids, labels=input_ids).loss
        loss.backward()
        xm.optimizer_step(optimizer)
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
