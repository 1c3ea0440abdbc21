"""A word-level LSTM language model trained the way pytorch/examples' word_language_model does
(https://github.com/pytorch/examples/blob/main/word_language_model/main.py): the token stream
is batchified and moved to the device once, and each batch is the slice
`source[i:i + seq_len]` at a Python offset `i` that advances by bptt, with the hidden state
detached between batches and gradients clipped. Reproduced in our own words on a synthetic
token stream; torch's nn.LSTM is the model.

What is true (bare runtime): every batch has the same shape (10 x 20), yet each offset is baked
into the graph as the slice's bounds, so each of the 8 batches compiles a new graph (none
reused). The cause is the slicing line in get_batch. Fix: index with a device tensor of
positions (torch.index_select / gather with `offsets + i` as device data) or slice on the host
before moving each batch to the device, so the offset travels as data."""

import torch
import torch_xla
from torch import nn

BPTT, BATCH, TOKENS, VOCAB = 10, 20, 1620, 200


class RNNModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(VOCAB, 64)
        self.rnn = nn.LSTM(64, 64, 2)
        self.decoder = nn.Linear(64, VOCAB)

    def forward(self, tokens, hidden):
        output, hidden = self.rnn(self.encoder(tokens), hidden)
        return self.decoder(output).view(-1, VOCAB), hidden

    def init_hidden(self, batch, device):
        zeros = torch.zeros(2, batch, 64, device=device)
        return zeros, zeros.clone()


def batchify(data, batch, device):
    rows = data.size(0) // batch
    return data[: rows * batch].view(batch, -1).t().contiguous().to(device)


def get_batch(source, i):
    seq_len = min(BPTT, len(source) - 1 - i)
    data = source[i : i + seq_len]  # expect: recompilation
    target = source[i + 1 : i + 1 + seq_len].view(-1)
    return data, target


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    train_data = batchify(torch.randint(0, VOCAB, (TOKENS,)), BATCH, device)
    model = RNNModel().to(device)
    criterion = nn.CrossEntropyLoss()
    lr = 20.0
    hidden = model.init_hidden(BATCH, device)
    model.train()
    for i in range(0, train_data.size(0) - 1, BPTT):
        data, targets = get_batch(train_data, i)
        hidden = tuple(h.detach() for h in hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
