"""Capture real NVIDIA GPU traces with step markers: the test data in this folder.

Run on a machine with one CUDA GPU, JAX (CUDA) and PyTorch (CUDA):

    python capture_gpu.py OUT_DIR

It writes, under OUT_DIR:

* ``jax_mlp_steps.xplane.pb``: ``jax.profiler.trace`` around 12 steps of a jitted 4-layer MLP
  training step, each inside ``jax.profiler.StepTraceAnnotation("train", step_num=i)``. Step 0
  compiles; step 7 spends an extra 30 ms on the host before its step (a slow input batch), so
  one step is known to be host-bound;
* ``torch_mlp_steps.pt.trace.json.gz``: ``torch.profiler`` (Kineto, CPU + CUDA activities) over
  steps 3..8 of the same MLP in PyTorch eager mode, ``prof.step()`` at each step end (the trace
  then holds ``ProfilerStep#N`` ranges);
* ``capture_gpu.json``: what the script measured itself, independently of any trace decoder:
  per-step host wall time (``time.perf_counter`` around the step, synchronised), the step
  numbers annotated, the device name, and package versions.
"""

from __future__ import annotations

import gzip
import json
import shutil
import socket
import sys
import time
from pathlib import Path

import numpy as np

STEPS = 12
SLOW_STEP = 7
SLOW_HOST_S = 0.030
WIDTH, DEPTH, BATCH = 1024, 4, 256


def jax_capture(out: Path, facts: dict) -> None:
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    keys = jax.random.split(key, DEPTH)
    params = [jax.random.normal(k, (WIDTH, WIDTH)) / WIDTH**0.5 for k in keys]

    def loss_fn(params, x):
        for w in params:
            x = jnp.tanh(x @ w)
        return jnp.mean(x**2)

    @jax.jit
    def train_step(params, x):
        loss, grads = jax.value_and_grad(loss_fn)(params, x)
        return [w - 1e-3 * g for w, g in zip(params, grads, strict=True)], loss

    rng = np.random.default_rng(0)
    logdir = out / "jax_logdir"
    walls = []
    with jax.profiler.trace(str(logdir)):
        for step in range(STEPS):
            start = time.perf_counter()
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                if step == SLOW_STEP:
                    time.sleep(SLOW_HOST_S)  # a slow input batch: host work, device idle
                x = jnp.asarray(rng.standard_normal((BATCH, WIDTH), dtype=np.float32))
                params, loss = train_step(params, x)
                loss.block_until_ready()
            walls.append(time.perf_counter() - start)
    found = sorted(logdir.rglob("*.xplane.pb"))
    assert len(found) == 1, found
    shutil.copy(found[0], out / "jax_mlp_steps.xplane.pb")
    facts["jax"] = {
        "version": jax.__version__,
        "devices": [str(d) for d in jax.devices()],
        "device_kind": jax.devices()[0].device_kind,
        "steps_annotated": list(range(STEPS)),
        "slow_host_step": SLOW_STEP,
        "slow_host_extra_s": SLOW_HOST_S,
        "host_wall_s_per_step": walls,
        "xplane_original_name": str(found[0].relative_to(logdir)),
    }


def torch_capture(out: Path, facts: dict) -> None:
    import torch

    device = torch.device("cuda")
    torch.manual_seed(0)
    layers = []
    for _ in range(DEPTH):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh()]
    model = torch.nn.Sequential(*layers).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    traces = out / "torch_logdir"
    walls = []
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    schedule = torch.profiler.schedule(wait=1, warmup=2, active=6, repeat=1)
    with torch.profiler.profile(
        activities=activities,
        schedule=schedule,
        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(traces), use_gzip=True),
    ) as prof:
        for _step in range(STEPS):
            start = time.perf_counter()
            x = torch.randn(BATCH, WIDTH, device=device)
            loss = model(x).pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            torch.cuda.synchronize()
            walls.append(time.perf_counter() - start)
            prof.step()
    found = sorted(traces.glob("*.pt.trace.json.gz"))
    assert len(found) == 1, found
    shutil.copy(found[0], out / "torch_mlp_steps.pt.trace.json.gz")
    with gzip.open(found[0], "rt") as handle:
        document = json.load(handle)
    steps = sorted(
        e["name"]
        for e in document["traceEvents"]
        if str(e.get("name", "")).startswith("ProfilerStep#")
    )
    facts["torch"] = {
        "version": torch.__version__,
        "device_name": torch.cuda.get_device_name(0),
        "schedule": "wait=1, warmup=2, active=6: steps 3..8 recorded",
        "profiler_steps_in_trace": steps,
        "host_wall_s_per_step": walls,
    }


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    facts: dict = {
        "hostname": socket.gethostname(),
        "captured": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    jax_capture(out, facts)
    torch_capture(out, facts)
    (out / "capture_gpu.json").write_text(json.dumps(facts, indent=2))
    print(json.dumps(facts, indent=2))


if __name__ == "__main__":
    main()
