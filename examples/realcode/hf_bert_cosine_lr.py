"""The BERT fine-tune with transformers' cosine schedule (get_cosine_schedule_with_warmup) and
AdamW's decoupled weight decay: at the last step the learning rate is so small that AdamW's
`param.mul_(1 - lr * weight_decay)` factor rounds to 1.0 in float32, torch_xla bakes it into
the graph as a constant instead of passing it as device data, and the step recompiles once.
Reproduced from what a user saw on the PyTorch/XLA BERT fine-tune recipes (an lr schedule
decaying to ~0: https://github.com/huggingface/transformers/blob/main/src/transformers/optimization.py).

What is true (bare runtime): 2 warm-up compilations, then one more at the last step (a graph
with one input fewer). The user's line is the optimizer step; the cause is the schedule's tiny
last learning rate. Fix: keep lr * weight_decay above ~6e-8 at the end (a floor on the
schedule) or stop the schedule before it reaches ~0."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
import torch_xla.core.xla_model as xm
from transformers import BertConfig, BertForSequenceClassification, get_cosine_schedule_with_warmup

STEPS = 12
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
    scheduler = get_cosine_schedule_with_warmup(optimizer, 2, STEPS)
    model.train()
    for _step in range(STEPS):
        input_ids = torch.randint(0, config.vocab_size, (BATCH, LENGTH)).to(device)
        labels = torch.randint(0, config.num_labels, (BATCH,)).to(device)
        loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        xm.optimizer_step(optimizer)  # expect: recompilation
        scheduler.step()
        optimizer.zero_grad()
        xm.mark_step()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
