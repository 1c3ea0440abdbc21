"""accelerate's own NLP example on the XLA device: a datasets.Dataset (built in memory with
`Dataset.from_dict`, tokenized with `.map`, `.with_format("torch")`), padded to a fixed length
as the example does on TPU, a tiny random-init BertForSequenceClassification, AdamW with a
linear warm-up, everything through `accelerator.prepare`, `accelerator.backward`, and an
evaluation pass gathering predictions with `accelerator.gather_for_metrics`.

Source: huggingface/accelerate examples/nlp_example.py (training_function: the XLA branch of
collate_fn pads to max_length; prepare; backward; gather_for_metrics), and huggingface/datasets
docs/source/use_with_pytorch.mdx (from_dict, with_format("torch")), reproduced in our own words
with random token ids in place of GLUE MRPC and the tokenizer.

What is true (bare runtime): fixed shapes (every batch padded to 32 tokens, drop_last), one
training graph reused after the first step and one evaluation graph. accelerate's XLA loader
syncs once per batch. No recompilation, fallback, unrolled loop or graph break. The evaluation's
reads of the predictions are the metric's (once per evaluation batch) and transformers' mask
helper reads the attention mask inside the model (hf_bert_finetune): host syncs left unjudged
here."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from accelerate import Accelerator
from datasets import Dataset
from torch.utils.data import DataLoader
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup

MAX_LENGTH = 32
BATCH = 8
EPOCHS = 1


def dataset(rows: int, seed: int) -> Dataset:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(8, MAX_LENGTH, (rows,), generator=generator).tolist()
    ids = [torch.randint(5, 512, (n,), generator=generator).tolist() for n in lengths]
    labels = torch.randint(0, 2, (rows,), generator=generator).tolist()
    return Dataset.from_dict({"input_ids": ids, "label": labels})


def pad(example: dict) -> dict:
    ids = example["input_ids"][:MAX_LENGTH]
    example["attention_mask"] = [1] * len(ids) + [0] * (MAX_LENGTH - len(ids))
    example["input_ids"] = ids + [0] * (MAX_LENGTH - len(ids))
    return example


def main() -> None:
    accelerator = Accelerator()
    torch.manual_seed(0)
    train = dataset(48, 1).map(pad).rename_column("label", "labels").with_format("torch")
    evaluation = dataset(16, 2).map(pad).rename_column("label", "labels").with_format("torch")
    train_loader = DataLoader(train, batch_size=BATCH, shuffle=True, drop_last=True)
    eval_loader = DataLoader(evaluation, batch_size=BATCH, drop_last=True)
    config = BertConfig(
        vocab_size=512,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    schedule = get_linear_schedule_with_warmup(optimizer, 2, len(train_loader) * EPOCHS)
    model, optimizer, train_loader, eval_loader, schedule = accelerator.prepare(
        model, optimizer, train_loader, eval_loader, schedule
    )
    for _epoch in range(EPOCHS):
        model.train()
        for batch in train_loader:
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
        model.eval()
        correct = total = 0
        for batch in eval_loader:
            with torch.no_grad():
                predictions = model(**batch).logits.argmax(dim=-1)
            predictions, references = accelerator.gather_for_metrics((predictions, batch["labels"]))
            correct += (predictions == references).sum().item()
            total += references.numel()
        accelerator.print(f"accuracy {correct / total:.3f}")


if __name__ == "__main__":
    main()
