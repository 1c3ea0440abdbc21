"""`xlaprof diff`: two runs compared, what got better and which findings went away."""

from __future__ import annotations

import json

from helpers import SAMPLES, cli


def test_diff_of_unrolled_and_scanned_runs() -> None:
    result = cli(
        "diff",
        str(SAMPLES / "runs" / "unrolled_layers"),
        str(SAMPLES / "runs" / "scanned_layers"),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert any("Unrolled loop" in title for title in document["findings_disappeared"])
    rows = {r["metric"]: r for r in document["comparison"]}
    assert rows["largest graph (ops)"]["ratio"] < 0.5
