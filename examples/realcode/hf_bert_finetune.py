"""A BERT sequence-classification fine-tune loop as the transformers docs write it: the model
from a (tiny, random-init) BertConfig, AdamW, get_linear_schedule_with_warmup, batches with an
attention mask, xm.optimizer_step and a mark_step per step.

What is true (bare runtime): transformers' SDPA mask helper checks `padding_mask.all()` in
Python on every forward (transformers/masking_utils.py, `_ignore_bidirectional_mask_sdpa`), so
each step reads a device value on the host before the step's sync: the mask's graph runs alone
(two executions a step) and the read waits for it. The user's line is the model call.
Fix for the code seen: drop the all-ones attention_mask (None means no padding), or pass a 4-D
mask; attn_implementation="eager" reads all the same (measured: docs/analyzers/host_sync.md)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
import torch_xla.core.xla_model as xm
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup

STEPS = 10
BATCH, LENGTH = 8, 32


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    config = BertConfig(
        vocab_size=512,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
        num_labels=3,
    )
    model = BertForSequenceClassification(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    scheduler = get_linear_schedule_with_warmup(optimizer, 2, STEPS)
    model.train()
    for _step in range(STEPS):
        batch = {
            "input_ids": torch.randint(0, config.vocab_size, (BATCH, LENGTH)).to(device),
            "attention_mask": torch.ones(BATCH, LENGTH, dtype=torch.long).to(device),
            "labels": torch.randint(0, config.num_labels, (BATCH,)).to(device),
        }
        outputs = model(**batch)  # expect: host_sync
        outputs.loss.backward()
        xm.optimizer_step(optimizer)
        scheduler.step()
        optimizer.zero_grad()
        xm.mark_step()
    print(f"final loss {outputs.loss.item():.4f}")


if __name__ == "__main__":
    main()
