"""transformers' Trainer fine-tuning a (tiny, random-init) BERT classifier on the XLA device:
TrainingArguments picks `xla:0` by itself when torch_xla is installed, and Trainer (through
accelerate) wraps the DataLoader in MpDeviceLoader and syncs each step. Trainer's default
optimizer (`adamw_torch_fused`) refuses XLA tensors ("`fused=True` requires ... devices: [...]
but torch.float32 and xla"), so the script names optim="adamw_torch", as an XLA user must.
Synthetic batches, no attention mask (see hf_bert_finetune.py for what one costs), drop_last.

What is true (bare runtime): see the manifest; Trainer logs every `logging_steps` (a host read
of the loss and the gradient norm each time)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import tempfile

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

STEPS = 8


class SyntheticText(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        generator = torch.Generator().manual_seed(index)
        return {
            "input_ids": torch.randint(0, 512, (32,), generator=generator),
            "labels": torch.randint(0, 3, (), generator=generator),
        }


def main() -> None:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=512,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
        num_labels=3,
    )
    model = BertForSequenceClassification(config)
    with tempfile.TemporaryDirectory() as output_dir:
        arguments = TrainingArguments(
            output_dir=output_dir,
            per_device_train_batch_size=8,
            max_steps=STEPS,
            logging_steps=4,
            optim="adamw_torch",
            report_to=[],
            save_strategy="no",
            dataloader_drop_last=True,
            disable_tqdm=True,
        )
        trainer = Trainer(model=model, args=arguments, train_dataset=SyntheticText())
        result = trainer.train()
    print(f"train loss {result.training_loss:.4f}")


if __name__ == "__main__":
    main()
