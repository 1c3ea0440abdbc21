"""A smaller configuration of examples/realcode/hf_mixtral_moe.py for a committed run directory:
the same transformers code (MixtralForCausalLM, experts_implementation="eager": the experts loop
that routes tokens with torch.where(mask) and indexes each expert's tokens), one decoder layer,
a hidden size of 32, 3 experts with one per token and 16 tokens a step, so that the recorded run
stays small. What is true is as there: the
routing's data-dependent shapes compile new graphs every step, inside transformers; the user's
line is the model call; the fix is experts_implementation="batched_mm"."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
import torch_xla.core.xla_model as xm
from transformers import MixtralConfig, MixtralForCausalLM

STEPS = 3


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    config = MixtralConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=3,
        num_experts_per_tok=1,
        max_position_embeddings=32,
        experts_implementation="eager",
    )
    model = MixtralForCausalLM(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _step in range(STEPS):
        ids = torch.randint(0, 128, (2, 8)).to(device)
        out = model(input_ids=ids, labels=ids)  # the user's line: the model call
        out.loss.backward()
        xm.optimizer_step(optimizer)
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {out.loss.item():.4f}")


if __name__ == "__main__":
    main()
