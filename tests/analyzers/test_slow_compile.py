"""Slow compilation (``xlaprof.analyzers.slow_compile``): judged on durations, so on fixed
inputs here (a TPU-sized report), never on a run this machine timed."""

from __future__ import annotations

import pytest
from helpers import findings_for

from xlaprof.findings import Kind


def test_slow_compile_on_tpu_sized_report(data_dir) -> None:
    (finding,) = findings_for(data_dir / "tpu_slow_compile.txt")
    assert finding.kind == Kind.SLOW_COMPILE
    assert finding.evidence["mean_compile_seconds"] == pytest.approx(9774.123456789 / 4)
    assert "initialize_cache" in finding.suggestion
