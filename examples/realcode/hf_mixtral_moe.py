"""A mixture-of-experts causal-LM step with transformers' MixtralForCausalLM (tiny random-init
config: 2 layers, 4 experts, top-2), experts_implementation="eager": the experts loop that
indexes the tokens routed to each expert (transformers/models/mixtral/modeling_mixtral.py,
MixtralExperts.forward). On this device transformers' default ("grouped_mm") fails: it calls
torch.histc on int32 expert ids, which falls back to the CPU and has no int kernel there.

What is true (bare runtime): every forward takes `expert_hit = ....nonzero()` (a CPU fallback
with a data-dependent shape), iterates it in Python and compares each id with an int (host
reads), and gathers `hidden_states[token_idx]` with `torch.where` sizes that change with the
routing: 31 compiles in 3 steps (new graphs every step), 129 executions, 97 host reads.
All of it lives in the library; the user's line is the model call. Fix for the code seen:
experts_implementation="batched_mm" (fixed shapes, see hf_mixtral_batched.py)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
import torch_xla.core.xla_model as xm
from transformers import MixtralConfig, MixtralForCausalLM

STEPS = 3
BATCH, LENGTH = 2, 16


def config(experts: str) -> MixtralConfig:
    return MixtralConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=64,
        experts_implementation=experts,
    )


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = MixtralForCausalLM(config("eager")).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _step in range(STEPS):
        ids = torch.randint(0, 512, (BATCH, LENGTH)).to(device)
        out = model(input_ids=ids, labels=ids)  # expect: aten_fallback, host_sync, recompilation
        loss = out.loss
        loss.backward()
        xm.optimizer_step(optimizer)
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
