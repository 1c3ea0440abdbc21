"""The eager_mode fix, measured on its real-code set-up (examples/realcode/eager_mode_gpt2).

Three fresh processes run the same GPT-2 training step (transformers, tiny random-init config):
``eager`` (``eager_mode(True)``, as the set-up does), ``compiled`` (eager mode still on, the step
wrapped in ``torch_xla.compile``) and ``lazy`` (eager mode off, ``torch_xla.sync()`` per step).
Each prints its steady steps' median wall time (steps 2+, device work waited for), the runtime's
own op executions per steady step (``ExecuteComputation``) and the final loss. The ratios are what
docs/analyzers/eager_mode.md quotes; absolute times on a shared 2-core VM are noisy.

    PJRT_DEVICE=CPU python benchmarks/eager_mode.py [--steps 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

VARIANT = r"""
import json, os, statistics, sys, time
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch, torch_xla
import torch_xla.debug.metrics as met
from transformers import GPT2Config, GPT2LMHeadModel

mode, steps = sys.argv[1], int(sys.argv[2])
if mode in ("eager", "compiled"):
    torch_xla.experimental.eager_mode(True)
torch.manual_seed(0)
device = torch_xla.device()
config = GPT2Config(vocab_size=512, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                    bos_token_id=0, eos_token_id=0)
model = GPT2LMHeadModel(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

def train_step(input_ids):
    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss

step = torch_xla.compile(train_step) if mode == "compiled" else train_step
times, executed = [], []
for n in range(steps):
    before = met.counter_value("ExecuteComputation") or 0
    start = time.perf_counter()
    loss = step(torch.randint(0, config.vocab_size, (4, 32)).to(device))
    torch_xla.sync(wait=True)
    times.append(time.perf_counter() - start)
    executed.append((met.counter_value("ExecuteComputation") or 0) - before)
print(json.dumps({"mode": mode, "step_s": statistics.median(times[2:]),
                  "executions_per_step": statistics.median(executed[2:]),
                  "compiles": met.counter_value("UncachedCompile"), "loss": loss.item()}))
"""


def run(mode: str, steps: int) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-c", VARIANT, mode, str(steps)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PJRT_DEVICE": "CPU"},
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    results = {mode: run(mode, args.steps) for mode in ("eager", "compiled", "lazy")}
    eager = results["eager"]
    for mode, result in results.items():
        print(
            f"{mode:9s} step {result['step_s'] * 1e3:7.1f} ms  "
            f"({eager['step_s'] / result['step_s']:.1f}x vs eager)  "
            f"op executions/step {result['executions_per_step']:5.0f}  "
            f"compiles {result['compiles']:4d}  final loss {result['loss']:.4f}"
        )


if __name__ == "__main__":
    main()
