"""LoRA fine-tuning with peft on a tiny random-init LlamaForCausalLM: `get_peft_model` with a
LoraConfig on the attention projections, AdamW over the trainable (adapter) parameters only,
one sync a step.

Source: huggingface/peft README and docs/source/quicktour.md (LoraConfig(task_type=CAUSAL_LM,
r=8, lora_alpha=32, lora_dropout=0.1), get_peft_model, a plain training loop), reproduced in our
own words on a model made from a config.

What is true (bare runtime): a healthy step. The base weights are frozen and only the adapters
train; every step has the same shapes, so one step graph is compiled and reused after the
first (AdamW's state). Two decoder layers: no layer stack worth a scan. No recompilation, host
sync, fallback, unrolled loop or graph break."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
from peft import LoraConfig, TaskType, get_peft_model
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
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    base = LlamaForCausalLM(config)
    lora = LoraConfig(
        task_type=TaskType.CAUSAL_LM,
        r=8,
        lora_alpha=32,
        lora_dropout=0.1,
        target_modules=["q_proj", "v_proj"],
    )
    model = get_peft_model(base, lora).to(device)
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-3)
    for _step in range(STEPS):
        input_ids = torch.randint(0, config.vocab_size, (BATCH, LENGTH)).to(device)
        loss = model(input_ids=input_ids, labels=input_ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
