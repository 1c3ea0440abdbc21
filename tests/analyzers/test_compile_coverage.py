"""What the compile analyzers say they could not judge on real captures that hold compile spans
(JAX's ``backend_compile_and_load``, the PJRT C API's ``PJRT_Client_Compile``, TorchTPU's
``backend_compile``) but no compile records: never "no compilation data in the input", and
the reason names as many compiles as the capture's spans time, counted here from an
independent decode (``decode.decode_xspace``), not from xlaprof.

The captures: JAX on CPU (sample_traces/jax_cpu: 4 compiles, one after warm-up), JAX on the
H100 (sample_traces/gpu: 2 compiles, each PJRT's span inside JAX's) and the TPU inference
capture of ../shared/traces (4 compiles).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from decode import decode_xspace
from helpers import GPU_JAX, JAX_CPU, SAMPLES, TPU, analyze_json, cli

# The host's compile spans, by name: JAX's, the PJRT C API's, TorchTPU's.
COMPILE_SPANS = ("backend_compile_and_load", "PJRT_Client_Compile", "backend_compile")
KINDS = ("recompilation", "slow_compile")


def decoded_compiles(path: Path) -> tuple[int, float]:
    """The compiles the capture's compile spans time (a span inside another of its line, as
    PJRT's inside JAX's, not counted again) and the spans' seconds, from the raw XSpace."""
    lines: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for event in decode_xspace(path).events:
        if event.name in COMPILE_SPANS and event.plane.startswith("/host"):
            lines.setdefault((event.plane, event.line), []).append((event.start_ns, event.end_ns))
    count, seconds = 0, 0.0
    for spans in lines.values():
        reach = float("-inf")
        for start, end in sorted(spans):
            if start >= reach:
                count += 1
                seconds += (end - start) / 1e9
            reach = max(reach, end)
    return count, seconds


@pytest.fixture(scope="module", params=["jax_cpu", "gpu_jax", "tpu"])
def capture(
    request: pytest.FixtureRequest,
    shared_linked: dict[str, Path],
    gpu_linked: dict[str, Path],
) -> tuple[str, Path, dict[str, Any]]:
    path = {
        "jax_cpu": SAMPLES / "jax_cpu" / JAX_CPU,
        "gpu_jax": gpu_linked[GPU_JAX],
        "tpu": shared_linked[TPU],
    }[request.param]
    return request.param, path, analyze_json(path)


def test_compile_spans_are_not_called_no_compilation_data(
    capture: tuple[str, Path, dict[str, Any]],
) -> None:
    name, path, document = capture
    compiles, seconds = decoded_compiles(path)
    assert compiles > 0 and seconds > 0, f"{name}: the capture holds compile spans"
    coverage = {entry["kind"]: entry for entry in document["analyzers"]}
    for kind in KINDS:
        why = coverage[kind].get("why") or ""
        assert "no compilation data" not in why, f"{name} {kind}: {why}"
        if coverage[kind]["status"] == "not_measured":
            # the reason counts the compiles the capture's spans time
            assert f"{compiles} compile span" in why, f"{name} {kind}: {why}"
    timeline = document.get("timeline") or []
    measured = sum(row.get("compile_s") or 0.0 for row in timeline)
    # the story's compile figures come from these spans: never more than they time
    assert measured <= seconds * 1.01, f"{name}: timeline {measured} s, spans {seconds} s"


def test_the_console_line_names_the_spans(capture: tuple[str, Path, dict[str, Any]]) -> None:
    name, path, _ = capture
    compiles, _ = decoded_compiles(path)
    done = cli("analyze", str(path))
    assert done.returncode == 0, done.stderr
    line = next(text for text in done.stdout.splitlines() if text.startswith("Not measured:"))
    assert "no compilation data in the input" not in line, f"{name}: {line}"
    assert f"the capture's {compiles} compile span" in line, f"{name}: {line}"
