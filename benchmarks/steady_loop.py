"""A fixed-shape training loop that times its own steps (the workload of overhead.py).

Prints one JSON line: the median and quartiles of step wall time after warm-up. Step time is
measured the way a user would: from one torch_xla.sync() return to the next, so time the device
spends is included once its queue is full.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch_xla


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch_xla.device()
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(64, args.width).to(device)
    times = []
    last = time.perf_counter()
    for _ in range(args.steps):
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
        now = time.perf_counter()
        times.append(now - last)
        last = now
    torch_xla._XLAC._xla_wait_device_ops([])
    steady = times[args.warmup :]
    q1, median, q3 = statistics.quantiles(steady, n=4)
    print(json.dumps({"median_s": median, "q1_s": q1, "q3_s": q3, "steps": len(steady)}))


if __name__ == "__main__":
    main()
