"""A nanoGPT-style training loop (https://github.com/karpathy/nanoGPT/blob/master/train.py):
`gradient_accumulation_steps` micro-batches per optimizer step, each forward under autocast
with the loss divided by the number of micro-batches and `loss.backward()` at once, then
gradient clipping, the optimizer step and `zero_grad(set_to_none=True)`, and one
`torch_xla.sync()` per optimizer step. Our own words, a tiny causal transformer (one block,
width 32) on random tokens.

What is true (bare runtime): 4 optimizer steps of 4 micro-batches, one sync each; the step's
graph holds all 4 forwards and backwards (the micro-batch loop is traced 4 times over: an
unrolled loop at `for _micro_step in range(GRAD_ACCUM)`). Scan cannot hold it: the loop's body
calls `backward()`, which scan's traced function cannot contain. The fix: a sync per
micro-batch (`torch_xla.sync()` after `loss.backward()`: one small graph reused 4 times per
step), or torch_xla's gradient-accumulation helper
(torch_xla.experimental.gradient_accumulation), which runs the micro-batches in an XLA loop."""

import torch
import torch_xla
from torch import nn

BLOCK, VOCAB, WIDTH, BATCH = 16, 64, 32, 4
GRAD_ACCUM, MAX_ITERS = 4, 4


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.attn = nn.MultiheadAttention(WIDTH, 2, batch_first=True)
        self.mlp = nn.Sequential(
            nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH)
        )

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.wpe = nn.Embedding(BLOCK, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(1))
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, idx, targets):
        positions = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(positions)
        mask = torch.triu(torch.ones(idx.size(1), idx.size(1), device=idx.device), 1).bool()
        for block in self.blocks:
            x = block(x, mask)
        logits = self.head(x)
        return nn.functional.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def get_batch(data, device):
    starts = torch.randint(len(data) - BLOCK, (BATCH,))
    x = torch.stack([data[i : i + BLOCK] for i in starts])
    y = torch.stack([data[i + 1 : i + 1 + BLOCK] for i in starts])
    return x.to(device), y.to(device)


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    data = torch.randint(0, VOCAB, (4096,))
    model = GPT().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _iteration in range(MAX_ITERS):
        for _micro_step in range(GRAD_ACCUM):  # expect: unrolled_loop
            x, y = get_batch(data, device)
            with torch.autocast("xla", dtype=torch.bfloat16):
                loss = model(x, y) / GRAD_ACCUM
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch_xla.sync()


if __name__ == "__main__":
    main()
