"""The runtime's own counts in a recorded real-code run (sample_traces/realcode_runs/): read
from the run's final metrics report with regular expressions, never through xlaprof, so the
tests that judge xlaprof's findings on those runs take their truth from the runtime."""

from __future__ import annotations

import re

from helpers import SAMPLES

RUNS = SAMPLES / "realcode_runs"


def final_metrics(name: str) -> str:
    """The run's final metrics report (``metrics/final.txt``), as torch_xla printed it."""
    (path,) = RUNS.glob(f"{name}/*/metrics/final.txt")
    return path.read_text()


def counter(name: str, metric: str) -> int:
    """A counter's value (``Counter: X`` / ``Value: N``) in the run's final metrics report."""
    match = re.search(rf"Counter: {re.escape(metric)}\n\s+Value: (\d+)", final_metrics(name))
    assert match is not None, metric
    return int(match.group(1))


def samples(name: str, metric: str) -> int:
    """A metric's sample count (``Metric: X`` / ``TotalSamples: N``): for ``CompileTime``,
    the runtime's compile count."""
    match = re.search(rf"Metric: {re.escape(metric)}\n\s+TotalSamples: (\d+)", final_metrics(name))
    assert match is not None, metric
    return int(match.group(1))
