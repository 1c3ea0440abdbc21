"""A training loop with the two things the torch_xla guide recommends for logging and
validation: the loss is logged through `xm.add_step_closure` every 3 steps (as
https://github.com/pytorch/xla/blob/master/test/test_train_mp_mnist.py does with
`_train_update`), and every 4 steps a validation batch is evaluated and its accuracy read with
`.item()`. The model is timm's `Mlp` layer (timm.layers.Mlp, the MLP inside timm's
transformer blocks) with a linear head.

What is true (bare runtime): 12 training iterations; each validation adds an evaluation graph
that runs when its accuracy is read (3 in all), and each closure reads a loss already computed.
A step is a training iteration: the evaluations and closures are inside the iterations that
ran them, not extra steps. No host-sync finding is true (a read every 3 or 4 steps is logging,
and each evaluation read runs only the evaluation's own graph, after the step's sync).
Also measured: the training graph compiles once more at the step after the first evaluation
(4 compilations: 2 warm-up, the evaluation graph, the training graph again; all cached after),
with or without the closures and not without the evaluation. A one-time recompile of the step:
recompilation is left unjudged here."""

import torch
import torch_xla
import torch_xla.core.xla_model as xm
from timm.layers import Mlp
from torch import nn

STEPS = 12


def log_loss(step, loss):
    print(f"step {step} loss {loss.item():.4f}")


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(Mlp(32, 128, 32), nn.Linear(32, 4)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    val_x = torch.randn(64, 32).to(device)
    val_y = torch.randint(0, 4, (64,)).to(device)
    for step in range(STEPS):
        model.train()
        x = torch.randn(16, 32).to(device)
        y = torch.randint(0, 4, (16,)).to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        xm.optimizer_step(optimizer)
        optimizer.zero_grad()
        if step % 3 == 0:
            xm.add_step_closure(log_loss, args=(step, loss))
        torch_xla.sync()
        if step % 4 == 3:
            model.eval()
            with torch.no_grad():
                accuracy = (model(val_x).argmax(1) == val_y).float().mean()
            print(f"step {step} val accuracy {accuracy.item():.3f}")


if __name__ == "__main__":
    main()
