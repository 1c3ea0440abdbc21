"""Greedy generation with transformers' `model.generate()` on the XLA device with the static KV
cache (`cache_implementation="static"`): a tiny random-init LlamaForCausalLM, a batch of 2
prompts, 6 new tokens.

Source: huggingface/transformers docs/source/en/llm_optims.md ("Static kv-cache":
`model.generate(**inputs, cache_implementation="static")`), on a model made from a config.

What is true (bare runtime): the static cache gives every token's forward the same shapes, but
generate() still never syncs, so the only executions are the host reads inside generate (the
stopping criteria's end-of-sequence check and the mask checks), each compiling and running all
the tokens traced since the start (the cache's in-place updates stay pending). The graphs at the
one call site grow every token (the bare counters: see corpus.toml): growth, as with the dynamic
cache. The static cache alone does not fix it; what does is a sync per token (a StoppingCriteria
or streamer that calls torch_xla.sync()), after which the static cache's one shape compiles
once."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
from transformers import LlamaConfig, LlamaForCausalLM

NEW_TOKENS = 6


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    config = LlamaConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    model = LlamaForCausalLM(config).to(device).eval()
    input_ids = torch.randint(3, config.vocab_size, (2, 8)).to(device)
    attention_mask = torch.ones_like(input_ids)
    with torch.no_grad():
        output = model.generate(  # expect: recompilation
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            cache_implementation="static",
        )
    print(output.cpu()[0].tolist())


if __name__ == "__main__":
    main()
