"""Text classification with `DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8)` over a
dataset ordered shortest first (a length curriculum, as `sortish` or length-grouped samplers
give in their first batches), the way transformers' run_glue_no_trainer.py pads with
`pad_to_multiple_of` (https://github.com/huggingface/transformers/blob/main/examples/pytorch/text-classification/run_glue_no_trainer.py).
Our own words: a word-level tokenizer built in memory, 48 synthetic sentences of 50 to 72
words sorted by length, a tiny random-init BertForSequenceClassification, AdamW; 2 epochs of
6 batches of 8, a `torch_xla.sync()` after each.

What is true (bare runtime): each batch is padded to its longest sentence rounded up to 8:
56, 64, 64, 72, 72, 72 as the data goes on, three sizes each larger than the one before: no
fixed buckets, since which sizes occur depends on the data seen so far. 7 compiles, 24
executions; the new sizes compiled late (after warm-up) in epoch 1, reused in epoch 2. The
number of sizes grows with the data (up to the tokenizer's max length), so it is a
recompilation at the collator; the fix is padding to a fixed length (padding="max_length"
with max_length) or to a fixed set of bucket sizes chosen up front."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from torch.utils.data import DataLoader
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    DataCollatorWithPadding,
    PreTrainedTokenizerFast,
)

WORDS = [f"w{i}" for i in range(120)]
EPOCHS, BATCH, SENTENCES = 2, 8, 48


def build_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    vocab.update({word: i + 4 for i, word in enumerate(WORDS)})
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="[PAD]",
        unk_token="[UNK]",
        model_max_length=128,
    )


def sorted_dataset() -> Dataset:
    generator = torch.Generator().manual_seed(0)
    lengths = sorted(torch.randint(50, 73, (SENTENCES,), generator=generator).tolist())
    texts = [
        " ".join(WORDS[j] for j in torch.randint(0, len(WORDS), (n,), generator=generator))
        for n in lengths
    ]
    labels = torch.randint(0, 2, (SENTENCES,), generator=generator).tolist()
    return Dataset.from_dict({"text": texts, "label": labels})


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    tokenizer = build_tokenizer()
    dataset = sorted_dataset().map(
        lambda batch: tokenizer(batch["text"], truncation=True), batched=True
    )
    dataset = dataset.remove_columns(["text"]).rename_column("label", "labels")
    collator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8)  # expect: recompilation
    loader = DataLoader(dataset, batch_size=BATCH, collate_fn=collator)
    config = BertConfig(
        vocab_size=len(WORDS) + 4,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=2,
    )
    model = BertForSequenceClassification(config).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    for epoch in range(EPOCHS):
        for batch in loader:
            batch = {key: value.to(device) for key, value in batch.items()}
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            torch_xla.sync()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
