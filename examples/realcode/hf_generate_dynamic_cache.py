"""Greedy generation with transformers' `model.generate()` on the XLA device, default (dynamic)
KV cache: a tiny random-init LlamaForCausalLM, a batch of 2 prompts, 6 new tokens, called the
way transformers' text-generation docs call it.

Source: huggingface/transformers docs/source/en/llm_tutorial.md (`model.generate(**inputs,
max_new_tokens=...)`) on a model made from a config, with no sync of our own.

What is true (bare runtime): generate() never syncs. Each token's forward is traced onto the
tensors of the last, and only the host reads inside generate (the stopping criteria's
end-of-sequence check, the mask helper's checks) run anything: each compiles and runs the whole
generation traced so far, because a read only materializes the value it reads and the dynamic
cache's tensors stay pending. So one call site compiles again and again with the same inputs,
its graphs growing every token (the bare counters: see corpus.toml). That is growth, not a
constant that changes. The fix: a sync per token (a StoppingCriteria or streamer that calls
torch_xla.sync(), or a hand-written decoding loop that syncs) so that every token runs one
graph of one size; transformers' static cache (`cache_implementation="static"`) makes that
graph's shapes the same every token, so it compiles once."""

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
        )
    print(output.cpu()[0].tolist())


if __name__ == "__main__":
    main()
