"""Input-bound steps (``xlaprof.analyzers.input_bound``), on the JAX-on-CPU capture whose
script paused 40 ms in ``load_batch`` at steps 104 and 107 (sample_traces/jax_cpu/README.md)."""

from __future__ import annotations

from typing import Any


def test_jax_cpu_input_pauses_are_input_bound_steps(jax_cpu_document: dict[str, Any]) -> None:
    findings = {f["kind"]: f for f in jax_cpu_document["findings"]}
    assert "input_bound" in findings
    assert findings["input_bound"]["evidence"]["steps_bound_by_it"] == [104, 107]
    assert "load_batch" in " ".join(findings["input_bound"]["evidence"]["input_spans_seconds"])
    # the bottleneck findings name where the device time goes
    assert any(":61" in line for line in findings["input_bound"]["evidence"]["top_device_lines"])
