"""Run every benchmark in this folder and print their figures (ratios within one run)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = ("overhead.py", "trace_load.py", "xplane_decode.py", "scan_fix.py", "pod_scale.py")


def main() -> None:
    for name in BENCHMARKS:
        print(f"== {name}")
        sys.argv = [str(HERE / name)]
        runpy.run_path(str(HERE / name), run_name="__main__")


if __name__ == "__main__":
    main()
