"""A Llama-style decoder written the way HF-style model code is: 8 blocks in a ModuleList, each
called as `layer(hidden, mask)` and returning a tuple `(hidden, attention_probs)`, the loop in
the model's forward. The blocks are built from transformers' own LlamaRMSNorm and LlamaMLP.
The pattern reproduces the decoder stacks of HF-style code (for example
https://github.com/huggingface/transformers/blob/main/src/transformers/models/llama/modeling_llama.py,
whose layers take the mask and position embeddings as arguments) in our own words.

What is true: an unrolled stack of 8 identical DecoderBlock at the `for layer in self.layers`
line. A scan_layers rewrite must carry the mask (scan_layers passes one carried input) and keep
only the hidden state of each block's tuple: `x = scan_layers(self.layers, x)` cannot work."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
from torch import nn
from transformers.models.llama.modeling_llama import LlamaConfig, LlamaMLP, LlamaRMSNorm

STEPS = 5
BATCH, LENGTH, WIDTH, HEADS = 4, 32, 64, 4


class DecoderBlock(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.attn_norm = LlamaRMSNorm(config.hidden_size)
        self.attn = nn.MultiheadAttention(config.hidden_size, HEADS, batch_first=True)
        self.mlp_norm = LlamaRMSNorm(config.hidden_size)
        self.mlp = LlamaMLP(config)

    def forward(self, hidden, mask):
        normed = self.attn_norm(hidden)
        attended, probs = self.attn(normed, normed, normed, attn_mask=mask)
        hidden = hidden + attended
        hidden = hidden + self.mlp(self.mlp_norm(hidden))
        return hidden, probs


class Decoder(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([DecoderBlock(config) for _ in range(config.num_hidden_layers)])
        self.norm = LlamaRMSNorm(config.hidden_size)
        self.head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids):
        length = input_ids.shape[1]
        mask = torch.triu(
            torch.full((length, length), float("-inf"), device=input_ids.device), diagonal=1
        )
        hidden = self.embed(input_ids)
        for layer in self.layers:  # expect: unrolled_loop
            hidden, _probs = layer(hidden, mask)
        return self.head(self.norm(hidden))


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    config = LlamaConfig(
        vocab_size=512, hidden_size=WIDTH, intermediate_size=128, num_hidden_layers=8
    )
    model = Decoder(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _step in range(STEPS):
        tokens = torch.randint(0, config.vocab_size, (BATCH, LENGTH + 1)).to(device)
        logits = model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


def make():
    """The bench target (`xlaprof bench scan own_decoder_tuple_layers.py:make`): model, batch."""
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=512, hidden_size=WIDTH, intermediate_size=128, num_hidden_layers=8
    )
    return Decoder(config), torch.randint(0, config.vocab_size, (BATCH, LENGTH))


if __name__ == "__main__":
    main()
