"""A timm Vision Transformer (random init, a tiny config: 32x32 images, 8x8 patches, width 64,
depth 6) trained with timm's own optimizer factory (create_optimizer_v2, AdamW) and its
mixup-free soft-target loss, one sync per step.

What is true: timm's VisionTransformer holds its blocks in an nn.Sequential (`self.blocks`) and
calls it in its forward_features, so the trace unrolls 6 identical Block copies; the stack lives
in the library and the user's line is the model call. For the code seen the stack's blocks take
one tensor and return one (scan_layers' shape), but the loop is timm's: the user would replace
model.blocks's call, not a loop of theirs."""

import timm
import torch
import torch_xla
from timm.loss import SoftTargetCrossEntropy
from timm.optim import create_optimizer_v2

STEPS = 5
BATCH = 8


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = timm.models.VisionTransformer(
        img_size=32, patch_size=8, num_classes=10, embed_dim=64, depth=6, num_heads=4
    ).to(device)
    optimizer = create_optimizer_v2(model, opt="adamw", lr=1e-3, weight_decay=0.05)
    criterion = SoftTargetCrossEntropy()
    for _step in range(STEPS):
        images = torch.randn(BATCH, 3, 32, 32).to(device)
        target = torch.softmax(torch.randn(BATCH, 10), dim=-1).to(device)
        loss = criterion(model(images), target)  # expect: unrolled_loop
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
