"""A GPT-2 language-model step (transformers, tiny random-init config) run with
`torch_xla.experimental.eager_mode(True)`, the mode the torch_xla guide offers for debugging
and the default of eager-first stacks: every op runs as its own graph as it is called.

What is true (bare runtime): the CompileTime/ExecuteTime metrics record nothing in eager mode;
the UncachedCompile/CachedCompile counters show one compile per distinct op (~hundreds in the
first steps) and one execution per op call (hundreds a step). A run like this is eager, and
that is its cost: per-op dispatch with no fusion. Fix: switch eager mode off for training and
compile the step (torch_xla.compile(step_fn))."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
from transformers import GPT2Config, GPT2LMHeadModel

STEPS = 4


def main() -> None:
    torch_xla.experimental.eager_mode(True)  # expect: eager_mode
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
    model = GPT2LMHeadModel(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _step in range(STEPS):
        input_ids = torch.randint(0, config.vocab_size, (4, 32)).to(device)
        loss = model(input_ids=input_ids, labels=input_ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
