"""A Llama causal-LM pre-training step with transformers' LlamaForCausalLM (tiny random-init
config, 8 decoder layers). transformers' LlamaModel.forward loops over its ModuleList of
LlamaDecoderLayer, so the lazy trace unrolls 8 copies of the layer in forward and backward.

What is true: an unrolled layer stack (8 identical LlamaDecoderLayer) whose loop lives inside
the library; the user's line is the model call. The fix the user can apply is not to edit
transformers' loop: wrap model.model.layers with scan_layers in a subclass/forward override,
passing the attention mask and position embeddings the layers take (keyword arguments), or
accept the unrolled graph (8 layers compile in seconds)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
from transformers import LlamaConfig, LlamaForCausalLM

STEPS = 6
BATCH, LENGTH = 4, 32


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    config = LlamaConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=8,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = LlamaForCausalLM(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _step in range(STEPS):
        input_ids = torch.randint(0, config.vocab_size, (BATCH, LENGTH)).to(device)
        loss = model(input_ids=input_ids, labels=input_ids).loss  # expect: unrolled_loop
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
