"""What a device op is: one of ``CATEGORIES``, from its XLA category where known, else its name."""

from __future__ import annotations

CATEGORIES = (
    "matmul_conv",
    "fusion",
    "collective",
    "copy",
    "infeed_outfeed",
    "host_offload",
    "autotune",
    "other",
)


# XProf's off-duty HLO categories (tsl::profiler::IsOffDutyOp): waiting on the host, not busy.
OFF_DUTY_CATEGORIES = frozenset(
    {
        "infeed",
        "outfeed",
        "host send",
        "host send-done",
        "host recv",
        "host recv-done",
        "megacore fusion",
    }
)


# TPU memory space 5 is host memory: a copy to or from S(5) is a host-offload transfer.
_HOST_MEMORY_SPACE = "S(5)"


def categorize(hlo_category: str | None, name: str, kineto_cat: str | None = None) -> str:
    """One of ``CATEGORIES`` for an op, from its XLA category where known, else its name."""
    text = name.lower()
    if hlo_category:
        category = hlo_category.lower()
        if "infeed" in category or "outfeed" in category:
            return "infeed_outfeed"
        if category.startswith(("host send", "host recv")):
            return "host_offload"
        if category.startswith("copy") and _HOST_MEMORY_SPACE in name:
            return "host_offload"
        if category.startswith(("all-", "reduce-scatter", "collective", "send", "recv")):
            return "collective"
        if "megascale" in category or "all-reduce" in category:
            return "collective"
        if "convolution" in category or category in ("dot", "output fusion", "gemm"):
            return "matmul_conv"
        if category.startswith("copy") or category in (
            "data formatting",
            "dynamic-update-slice",
            "dynamic-slice",
            "transpose",
        ):
            return "copy"
        if "fusion" in category:
            return "fusion"
        return "other"
    if kineto_cat == "gpu_memset":
        return "copy"
    if kineto_cat == "gpu_memcpy" or "memcpy" in text:
        # Kineto: "Memcpy HtoD (Pageable -> Device)"; XSpace (CUPTI via XLA): "MemcpyH2D"
        between_host_and_device = ("htod", "dtoh", "htoh", "h2d", "d2h", "h2h")
        return "host_offload" if any(k in text for k in between_host_and_device) else "copy"
    if any(k in text for k in ("nccl", "rccl", "all-reduce", "allreduce", "all-gather")):
        return "collective"
    if any(k in text for k in ("reduce-scatter", "reducescatter", "all-to-all", "alltoall")):
        return "collective"
    if any(
        k in text for k in ("gemm", "cijk_", "cublas", "cutlass", "matmul", "dot", "conv", "cudnn")
    ) or any(k in text for k in ("im2col", "im3d2col", "fmha", "flash", "fused_attn")):
        return "matmul_conv"
    if any(k in text for k in ("copybuffer", "memset", "fillbuffer", "copy")):
        return "copy"
    if "fusion" in text:
        return "fusion"
    return "other"
