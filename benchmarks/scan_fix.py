"""scan_layers before/after: the 32- and 64-block models of examples/unrolled_layers.py, and two
stacks whose layers take more than the state: the real-code decoder whose layers are called
`layer(hidden, mask)` and return `(hidden, probs)` (examples/realcode/own_decoder_tuple_layers.py)
and transformers' LlamaForCausalLM (keyword arguments: mask, rotary embeddings, integer position
ids; examples/bench_targets.py:llama_decoder).

Run: python benchmarks/scan_fix.py [LABEL ...]   (needs the runtime and realcode extras; CPU
PJRT here; labels select configurations, e.g. "tuple layers")

Each configuration is one `xlaprof bench scan` (before and after in fresh processes, the
numerical check included), with and without is_layer_pure. Printed as after/before ratios.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
# label: (folder, TARGET)
TARGETS = {
    "32 blocks": (EXAMPLES, "bench_targets.py:stack"),
    "64 blocks": (EXAMPLES, "bench_targets.py:stack64"),
    "tuple layers": (EXAMPLES / "realcode", "own_decoder_tuple_layers.py:make"),
    "llama": (EXAMPLES, "bench_targets.py:llama_decoder"),
}
METRICS = (
    "first-step compile time",
    "largest graph (ops)",
    "steady step time (median)",
    "host CPU per step (median)",
)


def bench(folder: Path, target: str, pure: bool, out: Path) -> dict:
    command = [
        sys.executable,
        "-m",
        "xlaprof",
        "bench",
        "scan",
        target,
        "--json",
        "--steps",
        "5",
        "--warmup",
        "2",
        "--out",
        str(out),
    ]
    if pure:
        command.append("--layer-pure")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        command, capture_output=True, text=True, cwd=folder, check=True, env=env
    )
    return json.loads(result.stdout)


def main(labels: list[str]) -> None:
    chosen = {k: v for k, v in TARGETS.items() if not labels or k in labels}
    with tempfile.TemporaryDirectory() as tmp:
        for label, (folder, target) in chosen.items():
            for pure in (False, True):
                out = Path(tmp) / f"{label}-{pure}".replace(" ", "")
                document = bench(folder, target, pure, out)
                rows = {r["metric"]: r for r in document["comparison"]}
                numerics = document["numerics"]
                state = "agree" if numerics["ok"] else "DISAGREE"
                diff = numerics["max_abs_diff"]
                print(f"{label}, is_layer_pure={pure}: numerics {state} (max diff {diff:.2g})")
                for metric in METRICS:
                    row = rows[metric]
                    unit = row["unit"]
                    scale, suffix = (1.0, "") if unit != "s" else (1e3, " ms")
                    before, after = row["before"] * scale, row["after"] * scale
                    print(
                        f"  {metric:28s} {before:10.2f}{suffix:3s} -> {after:10.2f}{suffix:3s} "
                        f"ratio {row['ratio']:.3f}  ({row['change']})"
                    )


if __name__ == "__main__":
    main(sys.argv[1:])
