"""A script that profiles itself with `xlaprof.profile()` (the manifest points it at a folder
through $NESTED_PROFILE_OUT) and is also run under `xlaprof run`, as a user does after
following both halves of the README. The model is transformers' GPT-2 (tiny random-init).

What is true: 6 training iterations, healthy. The outer run must record them (or say that an
inner profile() took them over): today's silent "0 steps" hides every step."""

import contextlib
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
from transformers import GPT2Config, GPT2LMHeadModel

STEPS = 6


def profiling():
    out = os.environ.get("NESTED_PROFILE_OUT")
    if not out:
        return contextlib.nullcontext()
    import xlaprof

    return xlaprof.profile(out)


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
    model = GPT2LMHeadModel(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    with profiling():
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
