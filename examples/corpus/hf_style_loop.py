"""HF-style loop: a config-built model returning a dict with the loss, AdamW, a linear warm-up
schedule, xm.optimizer_step and an explicit mark_step. Healthy: no findings."""

import torch
import torch_xla
import torch_xla.core.xla_model as xm
from torch import nn

STEPS = 10


class Config:
    vocab_size = 512
    hidden_size = 128
    num_labels = 4


class TinyClassifier(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.pre = nn.Linear(config.hidden_size, config.hidden_size)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, input_ids, labels=None):
        hidden = torch.tanh(self.pre(self.embed(input_ids).mean(dim=1)))
        logits = self.classifier(hidden)
        loss = None if labels is None else nn.functional.cross_entropy(logits, labels)
        return {"loss": loss, "logits": logits}


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    config = Config()
    model = TinyClassifier(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 4))
    model.train()
    for _step in range(STEPS):
        batch = {
            "input_ids": torch.randint(0, config.vocab_size, (16, 32)).to(device),
            "labels": torch.randint(0, config.num_labels, (16,)).to(device),
        }
        outputs = model(**batch)
        loss = outputs["loss"]
        loss.backward()
        xm.optimizer_step(optimizer)
        scheduler.step()
        optimizer.zero_grad()
        xm.mark_step()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
