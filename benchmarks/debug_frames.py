"""What printing more Python frames per PT_XLA_DEBUG event costs (PT_XLA_DEBUG_MAX_FRAME).

Run: python benchmarks/debug_frames.py [--repeats N] [--steps S] [--depths 4,40]
     (needs the runtime extra; PJRT_DEVICE=CPU is set here)

xlaprof sets ``PT_XLA_DEBUG_MAX_FRAME`` (capture/session.py ``DEBUG_MAX_FRAMES``) so that a sync
or a host read made deep inside a library still names the user's line: torch_xla's own default
prints 8 frames. Every execution at ``PT_XLA_DEBUG_LEVEL=2`` prints its stack, so the cost is
per execution and grows with the stack's depth, not with the limit: a stack shallower than 8
frames prints the same lines either way.

Each process runs the tiny-op loop of benchmarks/overhead.py's ``trivial`` workload (one add
and one sync a step) at a call depth of D Python frames, at level 2 with the limit at torch_xla's
default (8) and at xlaprof's; a process at level 0 is the floor. Variants run in an order rotated
each repeat; reported are the medians over repeats of the stepping thread's CPU per step and the
ratio of the two limits within a repeat (a ratio between processes: the machine's drift between
processes, a few percent on a shared VM, is its noise floor).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from xlaprof.capture.session import DEBUG_MAX_FRAMES  # noqa: E402

WARMUP_STEPS = 10
TORCH_XLA_DEFAULT = 8


def child(depth: int, steps: int) -> None:
    """One process: ``steps`` steps of one add and a sync, each at ``depth`` frames."""
    import torch
    import torch_xla

    device = torch_xla.device()
    x = torch.zeros(4, device=device)

    def step(level: int, value: torch.Tensor) -> torch.Tensor:
        if level > 1:
            return step(level - 1, value)
        value = value + 1
        torch_xla.sync()
        return value

    times = []
    for index in range(WARMUP_STEPS + steps):
        start = time.thread_time()
        x = step(depth, x)
        if index >= WARMUP_STEPS:
            times.append(time.thread_time() - start)
    print(json.dumps({"cpu_us": statistics.median(times) * 1e6}))


def run(depth: int, steps: int, level: int, frames: int | None, tmp: Path) -> float:
    env = dict(os.environ, PJRT_DEVICE="CPU", PT_XLA_DEBUG_LEVEL=str(level))
    env["PT_XLA_DEBUG_FILE"] = str(tmp / "debug.log")
    if frames is not None:
        env["PT_XLA_DEBUG_MAX_FRAME"] = str(frames)
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(depth), "--steps", str(steps)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    (tmp / "debug.log").unlink(missing_ok=True)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["cpu_us"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--depths", default="4,40")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.steps)
        return
    variants = {
        "level 0": (0, None),
        f"level 2, {TORCH_XLA_DEFAULT} frames": (2, TORCH_XLA_DEFAULT),
        f"level 2, {DEBUG_MAX_FRAMES} frames": (2, DEBUG_MAX_FRAMES),
    }
    names = list(variants)
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for depth in (int(d) for d in args.depths.split(",")):
            runs: dict[str, list[float]] = {name: [] for name in names}
            for repeat in range(args.repeats):
                shift = repeat % len(names)
                for name in names[shift:] + names[:shift]:
                    level, frames = variants[name]
                    runs[name].append(run(depth, args.steps, level, frames, tmp))
            short, long = names[1], names[2]
            ratios = [b / a for a, b in zip(runs[short], runs[long], strict=True)]
            results[f"depth {depth}"] = {
                **{f"{name}: CPU us per step": statistics.median(v) for name, v in runs.items()},
                f"{DEBUG_MAX_FRAMES} / {TORCH_XLA_DEFAULT} frames, median ratio": statistics.median(
                    ratios
                ),
                "ratio range": [min(ratios), max(ratios)],
            }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
