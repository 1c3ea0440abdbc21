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
# XLA categories (lowercase) by what they are, where a prefix or an exact name tells.
_COLLECTIVE_PREFIXES = ("all-", "reduce-scatter", "collective", "send", "recv")
_MATMUL_CATEGORIES = ("dot", "output fusion", "gemm")
_LAYOUT_CATEGORIES = ("data formatting", "dynamic-update-slice", "dynamic-slice", "transpose")
# Words in an op's name (lowercase) by category, tried in this order, for ops without one.
_NAME_WORDS = {
    "collective": (
        *("nccl", "rccl", "all-reduce", "allreduce", "all-gather"),
        *("reduce-scatter", "reducescatter", "all-to-all", "alltoall"),
    ),
    "matmul_conv": (
        *("gemm", "cijk_", "cublas", "cutlass", "matmul", "dot", "conv", "cudnn"),
        *("im2col", "im3d2col", "fmha", "flash", "fused_attn"),
    ),
    "copy": ("copybuffer", "memset", "fillbuffer", "copy"),
    "fusion": ("fusion",),
}
# A memcpy between host and device (else it is a copy on the device).
_HOST_DEVICE_COPIES = ("htod", "dtoh", "htoh", "h2d", "d2h", "h2h")


def categorize(hlo_category: str | None, name: str, kineto_cat: str | None = None) -> str:
    """One of ``CATEGORIES`` for an op, from its XLA category where known, else its name."""
    if hlo_category:
        return _by_hlo_category(hlo_category.lower(), name)
    return _by_name(name.lower(), kineto_cat)


def _by_hlo_category(category: str, name: str) -> str:
    if "infeed" in category or "outfeed" in category:
        return "infeed_outfeed"
    if category.startswith(("host send", "host recv")) or (
        category.startswith("copy") and _HOST_MEMORY_SPACE in name
    ):
        return "host_offload"
    if (
        category.startswith(_COLLECTIVE_PREFIXES)
        or "megascale" in category
        or "all-reduce" in category
    ):
        return "collective"
    if "convolution" in category or category in _MATMUL_CATEGORIES:
        return "matmul_conv"
    if category.startswith("copy") or category in _LAYOUT_CATEGORIES:
        return "copy"
    return "fusion" if "fusion" in category else "other"


def _by_name(text: str, kineto_cat: str | None) -> str:
    if kineto_cat == "gpu_memset":
        return "copy"
    if kineto_cat == "gpu_memcpy" or "memcpy" in text:
        # Kineto: "Memcpy HtoD (Pageable -> Device)"; XSpace (CUPTI via XLA): "MemcpyH2D"
        return "host_offload" if any(k in text for k in _HOST_DEVICE_COPIES) else "copy"
    found = (category for category, words in _NAME_WORDS.items() if any(w in text for w in words))
    return next(found, "other")
