"""Text classification fine-tuning with dynamic padding, the way transformers' text-classification
guide and run_glue_no_trainer.py feed a model
(https://huggingface.co/docs/transformers/tasks/sequence_classification,
https://github.com/huggingface/transformers/blob/main/examples/pytorch/text-classification/run_glue_no_trainer.py):
a `datasets.Dataset` tokenized by `Dataset.map` with truncation only, batched by a DataLoader
whose collate function is `DataCollatorWithPadding(tokenizer)`: each batch is padded to its own
longest sequence (padding="longest"). Reproduced in our own words with a word-level tokenizer
built in memory, 48 synthetic sentences of 4 to 40 words, a tiny random-init
BertForSequenceClassification, AdamW; 2 epochs of 6 batches of 8 (12 iterations), a
`torch_xla.sync()` after each. No shuffling: each batch's length is its longest sentence in words
(the tokenizer adds no special tokens), epoch 2 repeats epoch 1's. PAD_TO_MULTIPLE_OF=N pads to a
multiple of N (the collator's own option): the variant whose run `xlaprof diff` compares.

What is true (bare runtime): the batch size is 8 throughout; what varies is the sequence length
of each batch (its longest sentence), shared by input_ids, token_type_ids and attention_mask.
Each new length compiles new graphs. The cause is the padding to the longest in the batch, at
the collator; padding="max_length" with a max_length (or pad_to_multiple_of buckets) fixes it.
drop_last does not: no batch is short."""

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
EPOCHS, BATCH = 2, 8


def build_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    vocab.update({word: i + 4 for i, word in enumerate(WORDS)})
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        model_max_length=64,
    )


def synthetic_dataset() -> Dataset:
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(4, 41, (48,), generator=generator).tolist()
    texts = [
        " ".join(WORDS[j] for j in torch.randint(0, len(WORDS), (n,), generator=generator))
        for n in lengths
    ]
    labels = torch.randint(0, 2, (48,), generator=generator).tolist()
    return Dataset.from_dict({"text": texts, "label": labels})


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    tokenizer = build_tokenizer()
    dataset = synthetic_dataset().map(
        lambda batch: tokenizer(batch["text"], truncation=True), batched=True
    )
    dataset = dataset.remove_columns(["text"]).rename_column("label", "labels")
    multiple = int(os.environ.get("PAD_TO_MULTIPLE_OF", "0")) or None
    collator = DataCollatorWithPadding(  # expect: recompilation
        tokenizer, pad_to_multiple_of=multiple
    )
    loader = DataLoader(dataset, batch_size=BATCH, collate_fn=collator)
    config = BertConfig(
        vocab_size=len(WORDS) + 4,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=2,
    )
    model = BertForSequenceClassification(config).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    for epoch in range(EPOCHS):
        for batch in loader:
            batch = {key: value.to(device) for key, value in batch.items()}
            loss = model(**batch).loss  # expect: host_sync
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            torch_xla.sync()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
