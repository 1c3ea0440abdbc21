"""pytorch/xla's eager-with-compile training pattern: eager mode on for the whole script
(`torch_xla.experimental.eager_mode(True)`), the training step compiled with
`torch_xla.compile(step_fn)`, on a tiny random-init transformers LlamaForCausalLM.

Source: pytorch/xla examples/eager/train_decoder_only_eager_with_compile.py (eager mode, then
`self.step_fn = torch_xla.compile(self.step_fn)`) and docs/source/learn/eager.md, reproduced in
our own words with transformers' model in place of the example's decoder.

What is true (bare runtime): eager mode is on, but the step runs compiled: torch_xla.compile
traces the step lazily and runs it as one graph, compiled once and reused after the first
step (AdamW's state). Only the set-up and the final read run op by op. Eager mode is used as
torch_xla documents it, so there is nothing to fix: no eager-mode warning, no recompilation,
host sync, fallback or graph break (two decoder layers: no layer stack worth a scan)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
import torch_xla.experimental
from transformers import LlamaConfig, LlamaForCausalLM

STEPS = 6
BATCH, LENGTH = 4, 32


def main() -> None:
    torch_xla.experimental.eager_mode(True)
    torch.manual_seed(0)
    device = torch_xla.device()
    config = LlamaConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = LlamaForCausalLM(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    def step_fn(input_ids: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad()
        loss = model(input_ids=input_ids, labels=input_ids).loss
        loss.backward()
        optimizer.step()
        return loss

    step_fn = torch_xla.compile(step_fn)
    for _step in range(STEPS):
        input_ids = torch.randint(0, config.vocab_size, (BATCH, LENGTH)).to(device)
        loss = step_fn(input_ids)
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
