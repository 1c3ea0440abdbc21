"""Capture a real JAX-on-CPU training trace with step markers: the test data in this folder.

Run with ``jax`` (CPU) installed from the package registry:

    python sample_traces/jax_cpu/capture_jax_cpu.py OUT_DIR

It trains a small MLP (3 dense layers, tanh, SGD) for ``STEPS`` steps under
``jax.profiler.trace``, each step inside ``jax.profiler.StepTraceAnnotation("train",
step_num=FIRST_STEP + i)``, so the step numbers are the job's (they do not start at 0). Things a
bottleneck diagnosis should see, each put there on purpose and measured by the script itself:

* step ``FIRST_STEP`` compiles the training step (first call of the jitted function);
* steps in ``SLOW_INPUT_STEPS`` wait ``SLOW_INPUT_S`` on the host before their batch arrives
  (a slow input pipeline: ``time.sleep`` inside a ``load_batch`` annotation), so the device
  idles and the step is input-bound;
* step ``RESHAPE_STEP`` gets a batch of another size and compiles again (a recompilation in
  the middle of training);
* every other step is device-bound: the XLA CPU executor's matmuls fill it.

It writes under OUT_DIR:

* ``jax_cpu_mlp_steps.xplane.pb``: the capture (``plugins/profile/<time>/<host>.xplane.pb``,
  copied unchanged);
* ``capture_jax_cpu.json``: what the script measured without any trace decoder: each step's
  number and host wall time (``time.perf_counter`` around the step, with
  ``block_until_ready``), the slowed and recompiled steps, the compile count per shape, the
  versions.
"""

from __future__ import annotations

import json
import platform
import shutil
import socket
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

FIRST_STEP = 100
STEPS = 10
SLOW_INPUT_STEPS = (104, 107)
SLOW_INPUT_S = 0.040
RESHAPE_STEP = 108
WIDTH, DEPTH, BATCH, RESHAPED_BATCH = 512, 3, 256, 192


def train(out: Path) -> dict:
    """Train under the profiler; return what the script measured itself."""
    import jax
    import jax.numpy as jnp

    keys = jax.random.split(jax.random.PRNGKey(0), DEPTH)
    params = [jax.random.normal(k, (WIDTH, WIDTH)) / WIDTH**0.5 for k in keys]

    def loss_fn(params: list, x: jax.Array) -> jax.Array:
        for w in params:
            x = jnp.tanh(x @ w)
        return jnp.mean(x**2)

    compiled_shapes: list[list[int]] = []

    @jax.jit
    def train_step(params: list, x: jax.Array) -> tuple[list, jax.Array]:
        compiled_shapes.append(list(x.shape))  # runs only while JAX traces (once per shape)
        loss, grads = jax.value_and_grad(loss_fn)(params, x)
        return [w - 1e-3 * g for w, g in zip(params, grads, strict=True)], loss

    rng = np.random.default_rng(0)

    def load_batch(step: int) -> np.ndarray:
        with jax.profiler.TraceAnnotation("load_batch"):
            if step in SLOW_INPUT_STEPS:
                time.sleep(SLOW_INPUT_S)  # a slow input pipeline: host waits, device idles
            rows = RESHAPED_BATCH if step == RESHAPE_STEP else BATCH
            return rng.standard_normal((rows, WIDTH), dtype=np.float32)

    logdir = out / "logdir"
    walls = []
    with jax.profiler.trace(str(logdir)):
        for step in range(FIRST_STEP, FIRST_STEP + STEPS):
            start = time.perf_counter()
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                x = jnp.asarray(load_batch(step))
                params, loss = train_step(params, x)
                loss.block_until_ready()
            walls.append(time.perf_counter() - start)
    found = sorted(logdir.rglob("*.xplane.pb"))
    assert len(found) == 1, found
    shutil.copy(found[0], out / "jax_cpu_mlp_steps.xplane.pb")
    return {
        "hostname": socket.gethostname(),
        "captured": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": metadata.version("jaxlib"),
        "devices": [str(d) for d in jax.devices()],
        "model": {"width": WIDTH, "depth": DEPTH, "batch": BATCH, "dtype": "float32"},
        "steps_annotated": list(range(FIRST_STEP, FIRST_STEP + STEPS)),
        "slow_input_steps": list(SLOW_INPUT_STEPS),
        "slow_input_extra_s": SLOW_INPUT_S,
        "reshape_step": RESHAPE_STEP,
        "reshaped_batch": RESHAPED_BATCH,
        "compiled_shapes": compiled_shapes,
        "host_wall_s_per_step": walls,
        "xplane_original_name": str(found[0].relative_to(logdir)),
    }


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    facts = train(out)
    (out / "capture_jax_cpu.json").write_text(json.dumps(facts, indent=2) + "\n")
    print(json.dumps(facts, indent=2))


if __name__ == "__main__":
    main()
