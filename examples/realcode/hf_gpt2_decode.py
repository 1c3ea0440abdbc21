"""Greedy decoding with transformers' GPT2LMHeadModel (tiny random-init config), the way a
hand-written generation loop grows its input: `tokens = torch.cat([tokens, next_token], 1)`,
one sync per new token, no KV cache.

What is true (bare runtime): the input grows by one token each step, so every step traces graphs
of a new shape and compiles them (16 compilations, none reused). The line that makes the
changing input is the reassignment that grows it. Fix: a fixed-size buffer written in place with
a position index (or transformers' static cache), so every step has one shape.
Also true: with no attention mask and no cache, transformers' mask helper checks the position
ids for packed sequences in Python (`(packed_sequence_mask[:, -1] == 0).all()` in
transformers/masking_utils.py), a host read inside every forward that runs the graph traced so
far on its own: 8 reads, two executions a step. The user's line is the model call; an
attention_mask with attn_implementation="eager" reads nothing (docs/analyzers/host_sync.md)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
from transformers import GPT2Config, GPT2LMHeadModel

NEW_TOKENS = 8


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    config = GPT2Config(
        vocab_size=512,
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_positions=64,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = GPT2LMHeadModel(config).to(device).eval()
    tokens = torch.randint(0, config.vocab_size, (2, 8)).to(device)
    with torch.no_grad():
        for _step in range(NEW_TOKENS):
            logits = model(tokens, use_cache=False).logits  # expect: host_sync
            next_token = logits[:, -1].argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, next_token], dim=1)  # expect: recompilation
            torch_xla.sync()
    print(tokens.cpu()[0].tolist())


if __name__ == "__main__":
    main()
