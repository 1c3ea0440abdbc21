"""transformers' `model.generate()` on the XLA device with the default (dynamic) cache: greedy
decoding of 10 new tokens from a tiny random-init LlamaForCausalLM, the way the transformers
text-generation docs call it (https://huggingface.co/docs/transformers/main/en/llm_tutorial:
`model.generate(**inputs, max_new_tokens=...)` with an attention mask and an EOS id). A
`torch_xla.sync()` after each call, 2 calls (one xlaprof step each). Written in our own words.

What is true (bare runtime): nothing syncs inside generate, so each host read that transformers
makes runs the whole generation traced so far. transformers reads the device in three places of
its own, each once per new token: the causal-mask check in masking_utils (`padding_mask.all()`),
the stopping criteria's EOS check (`torch.isin(...)`, which does not lower: it falls back to the
CPU and reads its inputs), and generation's own loop (`unfinished_sequences.max() == 0` in
`_has_unfinished_sequences`). Each is its own read site with its own count; the user's line for
all of them is the generate call."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
from transformers import LlamaConfig, LlamaForCausalLM

CALLS, NEW_TOKENS = 2, 10


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    model = LlamaForCausalLM(config).to(device).eval()
    prompt = torch.randint(3, config.vocab_size, (2, 6)).to(device)
    mask = torch.ones_like(prompt)
    for _call in range(CALLS):
        with torch.no_grad():
            out = model.generate(  # expect: host_sync, aten_fallback
                input_ids=prompt,
                attention_mask=mask,
                max_new_tokens=NEW_TOKENS,
                do_sample=False,
            )
        torch_xla.sync()
    print(out.cpu()[0].tolist())


if __name__ == "__main__":
    main()
