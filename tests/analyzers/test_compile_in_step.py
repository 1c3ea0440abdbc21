"""Compilation inside a step (``xlaprof.analyzers.compile_in_step``), on the JAX-on-CPU capture
whose script changed its input's shape at step 108 (sample_traces/jax_cpu/README.md)."""

from __future__ import annotations

from typing import Any


def test_jax_cpu_recompile_is_a_compile_in_step(jax_cpu_document: dict[str, Any]) -> None:
    findings = {f["kind"]: f for f in jax_cpu_document["findings"]}
    assert "compile_in_step" in findings
    assert list(findings["compile_in_step"]["evidence"]["compiling_steps_seconds"]) == ["108"]
