"""A small text classifier whose batches are padded to their longest sequence
(`pad_sequence`, as a collate function does), with the loss read by `.item()` for a NaN guard
before `backward()`, as many hand-written loops do. Our own words, synthetic token data.

What is true (bare runtime): 10 steps with a sync each; the batches' longest lengths are 9,
13, 9, 17, 13, 21, 9, 25, 17, 29 (six distinct). The `.item()` runs the graph traced so far
(the forward up to the loss) on its own and the sync runs the rest (backward, SGD), so every
step is two graphs (20 executions) and every new length compiles both: 12 compiles, 2 per new
length, 10 reads (aten::_local_scalar_dense). It is one
cause (the padded length, at the pad_sequence line), so one recompilation finding, whose parts
are the two graphs the read splits the step into; its cost is the compile time of those steps
once, not twice. Fix: pad to a few fixed lengths (bucket), and read the loss after the sync."""

import math

import torch
import torch_xla
from torch import nn
from torch.nn.utils.rnn import pad_sequence

LENGTHS = (9, 13, 9, 17, 13, 21, 9, 25, 17, 29)
BATCH, VOCAB = 4, 100


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.mix = nn.Linear(32, 32)
        self.head = nn.Linear(32, 2)

    def forward(self, tokens):
        hidden = torch.tanh(self.mix(self.embed(tokens)))
        return self.head(hidden.mean(dim=1))


def collate(longest: int) -> tuple[torch.Tensor, torch.Tensor]:
    sequences = [torch.randint(1, VOCAB, (longest - k,)) for k in range(BATCH)]
    tokens = pad_sequence(sequences, batch_first=True)  # expect: recompilation
    return tokens, torch.randint(0, 2, (BATCH,))


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = Classifier().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for longest in LENGTHS:
        tokens, labels = collate(longest)
        tokens, labels = tokens.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = criterion(model(tokens), labels)
        if math.isnan(loss.item()):  # expect: host_sync
            continue
        loss.backward()
        optimizer.step()
        torch_xla.sync()


if __name__ == "__main__":
    main()
