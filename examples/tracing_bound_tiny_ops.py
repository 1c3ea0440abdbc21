"""Tracing-bound: thousands of tiny element-wise ops per step, each traced in Python.

Expected diagnosis: tracing_bound. The host spends far longer recording the ops than the device
spends running the fused graph, so the device waits on the host every step.
"""

import torch
import torch_xla
from _common import arguments


def main() -> None:
    args = arguments(default_steps=10)
    torch.manual_seed(args.seed)
    device = torch_xla.device()
    state = torch.zeros(64, device=device)
    weights = [torch.randn(64, device=device) for _ in range(16)]
    torch_xla.sync()
    for _step in range(args.steps):
        for _ in range(150):
            for w in weights:
                state = state * 0.999 + w * 0.001
        torch_xla.sync()
    print(f"final state mean {state.mean().item():.4f}")


if __name__ == "__main__":
    main()
