"""scan_layers before/after on the 32- and 64-block models of examples/unrolled_layers.py.

Run: python benchmarks/scan_fix.py   (needs the runtime extra; CPU PJRT here)

Each configuration is one `xlaprof bench scan` (before and after in fresh processes, the
numerical check included), with and without is_layer_pure. Printed as after/before ratios.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TARGETS = {"32 blocks": "bench_targets.py:stack", "64 blocks": "bench_targets.py:stack64"}
METRICS = (
    "first-step compile time",
    "largest graph (ops)",
    "steady step time (median)",
    "host CPU per step (median)",
)


def bench(target: str, pure: bool, out: Path) -> dict:
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
    result = subprocess.run(command, capture_output=True, text=True, cwd=EXAMPLES, check=True)
    return json.loads(result.stdout)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for label, target in TARGETS.items():
            for pure in (False, True):
                document = bench(target, pure, Path(tmp) / f"{label}-{pure}".replace(" ", ""))
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
    main()
