"""transformers' Trainer fine-tuning a (tiny, random-init) BERT classifier and evaluating it
with a `compute_metrics`, as the text-classification guide does
(https://huggingface.co/docs/transformers/tasks/sequence_classification): Trainer's evaluation
loop keeps every batch's logits and labels for the metrics and, with no
`eval_accumulation_steps`, concatenates them on the device batch after batch. Our own words:
synthetic batches, optim="adamw_torch" (the fused default refuses XLA tensors).

What is true (bare runtime): 4 training steps and one evaluation of 6 batches of 8, 23
compiles. The evaluation's accumulated logits grow by one batch each step ([8, 3], [16, 3],
... [40, 3]), a device-side growing accumulator: each batch's graph holds a concatenation of
a new size, so each evaluation batch compiles a new graph. The cause is Trainer's own
accumulation at the `trainer.evaluate()` call, not the input shapes (every batch is [8, 32]);
the fix is Trainer's option to move the outputs to the host every N batches,
`eval_accumulation_steps=1` in TrainingArguments (23 -> 8 compiles, measured), not padding,
bucketing or drop_last."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import tempfile

import numpy as np
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class SyntheticText(torch.utils.data.Dataset):
    def __init__(self, size: int, seed: int) -> None:
        self.size, self.seed = size, seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        generator = torch.Generator().manual_seed(self.seed + index)
        return {
            "input_ids": torch.randint(0, 512, (32,), generator=generator),
            "labels": torch.randint(0, 3, (), generator=generator),
        }


def accuracy(prediction) -> dict[str, float]:
    return {"accuracy": float(np.mean(prediction.predictions.argmax(-1) == prediction.label_ids))}


def main() -> None:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=512,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=3,
    )
    model = BertForSequenceClassification(config)
    with tempfile.TemporaryDirectory() as output_dir:
        arguments = TrainingArguments(
            output_dir=output_dir,
            per_device_train_batch_size=8,
            per_device_eval_batch_size=8,
            max_steps=4,
            optim="adamw_torch",
            report_to=[],
            save_strategy="no",
            dataloader_drop_last=True,
            disable_tqdm=True,
        )
        trainer = Trainer(
            model=model,
            args=arguments,
            train_dataset=SyntheticText(64, 0),
            eval_dataset=SyntheticText(48, 1000),
            compute_metrics=accuracy,
        )
        trainer.train()
        metrics = trainer.evaluate()  # expect: recompilation
    print(f"eval accuracy {metrics['eval_accuracy']:.3f}")


if __name__ == "__main__":
    main()
