"""Greedy decoding that grows the sequence with torch.cat every step: every step has a longer
input, so every step compiles a new graph.

Expected: one recompilation finding located at the torch.cat line (where each new shape is
made), not at the line that created the first tensor."""

import torch
import torch_xla
from torch import nn

STEPS = 8
VOCAB = 64


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.out = nn.Linear(32, VOCAB)

    def forward(self, tokens):
        return self.out(self.embed(tokens).cumsum(dim=1))


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = TinyLM().to(device).eval()
    tokens = torch.zeros(2, 1, dtype=torch.long).to(device)
    with torch.no_grad():
        for _step in range(STEPS):
            logits = model(tokens)[:, -1]
            nxt = logits.argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, nxt], dim=1)  # expect: recompilation
            torch_xla.sync()
    print(tokens.cpu()[0].tolist())


if __name__ == "__main__":
    main()
