"""Which events of a capture are device compute, and of what category
(``xlaprof.tables.device.events``).

Expected values come from this suite's independent decode of the H100 JAX capture.
"""

from __future__ import annotations

from typing import Any

from decode import Decoded

from xlaprof.tables import device as device_model


def test_autotuning_kernels_are_the_gpu_work_inside_the_compile_calls(
    jax_trace: Any, jax_xspace: Decoded
) -> None:
    # GIVEN the host's PJRT_Client_Compile calls (the PJRT C API's compile) and the GPU events
    # that start inside them: XLA's autotuner timing candidates, redzone checks, delay kernels
    compiles = [(e.start_ns, e.end_ns) for e in jax_xspace.named("PJRT_Client_Compile")]
    assert len(compiles) == 2  # jit_stage and jit_train_step, both in step 0
    inside = [
        e for e in jax_xspace.on("/device:GPU") if any(a <= e.start_ns < b for a, b in compiles)
    ]
    assert len(inside) == 2113
    # THEN exactly those are category autotune, all in step 0
    frame = device_model.device_events(jax_trace.events)
    assert int((frame["category"] == "autotune").sum()) == len(inside)
    steps = jax_trace.device_steps().set_index("step")
    assert steps.loc[0, "autotune_s"] > 0
    assert (steps.loc[1:, "autotune_s"] == 0).all()
    # an op's autotuning runs are a row of their own: the program ran each op once per step
    ops = jax_trace.device_ops()
    program = ops[(ops["category"] != "autotune") & ops["name"].str.startswith("gemm_fusion")]
    assert set(program["occurrences"]) == {len(steps)}
