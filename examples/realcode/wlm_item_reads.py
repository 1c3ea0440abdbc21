"""A word-level LSTM language model trained and evaluated the way pytorch/examples'
word_language_model does (https://github.com/pytorch/examples/blob/main/word_language_model/main.py):
`train()` adds `loss.item()` to a running total after every batch, and `evaluate()` adds
`len(data) * criterion(output, targets).item()` for every validation batch, once per epoch.
Reproduced in our own words on a synthetic token stream with torch's nn.LSTM. Unlike
wlm_get_batch, each batch is sliced on the host and moved to the device (the offsets travel as
data), so its graphs keep one shape: the reads are the only problem here.

What is true (bare runtime): 2 epochs of 6 training batches (12 iterations, a sync after each)
and 2 evaluations of 4 validation batches each. Two lines read the device: the training loop's
`loss.item()` (12 reads, each before the step's sync, so each runs the step's graph up to the
loss on its own) and the evaluation loop's `.item()` (8 reads: no sync in evaluate, so each
batch's read runs that batch's forward and waits for it). Each is its own read site; the fix
for both is to accumulate on the device (`total_loss += loss.detach()`) and read once."""

import torch
import torch_xla
from torch import nn

BPTT, BATCH, VOCAB, EPOCHS = 10, 8, 200, 2
TRAIN_TOKENS, VAL_TOKENS = 8 * 61, 8 * 41


class RNNModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(VOCAB, 32)
        self.rnn = nn.LSTM(32, 32, 2)
        self.decoder = nn.Linear(32, VOCAB)

    def forward(self, tokens, hidden):
        output, hidden = self.rnn(self.encoder(tokens), hidden)
        return self.decoder(output).view(-1, VOCAB), hidden

    def init_hidden(self, batch, device):
        zeros = torch.zeros(2, batch, 32, device=device)
        return zeros, zeros.clone()


def batchify(data, batch):
    rows = data.size(0) // batch
    return data[: rows * batch].view(batch, -1).t().contiguous()


def get_batch(source, i, device):
    seq_len = min(BPTT, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].reshape(-1)
    return data.to(device), target.to(device)


def evaluate(model, criterion, source, device):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(BATCH, device)
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, BPTT):
            data, targets = get_batch(source, i, device)
            output, hidden = model(data, hidden)
            total_loss += len(data) * criterion(output, targets).item()  # expect: host_sync
    return total_loss / (len(source) - 1)


def train(model, criterion, source, device, lr):
    model.train()
    total_loss = 0.0
    hidden = model.init_hidden(BATCH, device)
    for i in range(0, source.size(0) - 1, BPTT):
        data, targets = get_batch(source, i, device)
        hidden = tuple(h.detach() for h in hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()  # expect: host_sync
        torch_xla.sync()
    return total_loss


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    train_data = batchify(torch.randint(0, VOCAB, (TRAIN_TOKENS,)), BATCH)
    val_data = batchify(torch.randint(0, VOCAB, (VAL_TOKENS,)), BATCH)
    model = RNNModel().to(device)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(1, EPOCHS + 1):
        train_loss = train(model, criterion, train_data, device, lr=20.0)
        val_loss = evaluate(model, criterion, val_data, device)
        print(f"epoch {epoch} train {train_loss:.3f} valid {val_loss:.3f}")


if __name__ == "__main__":
    main()
