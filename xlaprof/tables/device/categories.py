"""What a device op is: one of ``CATEGORIES``, from its XLA category where known, else its name.

Kernel names are matched by whole words, not substrings: ``conv`` is a word of
``cudnn-conv.1`` and of ``implicit_convolve_sgemm`` but not of ``TensorConversionOp`` (a dtype
cast) or ``wrapped_convert``. A name's words are its parts between non-alphanumeric characters
and at lower-to-upper case changes, lower-cased (``TensorConversionOp`` -> tensor, conversion,
op); a C++ kernel is judged by its function name alone (``short_name``: no return type, template
arguments or parameters), so a parameter type such as ``cudnn::reduced_divisor`` does not make a
layout kernel a convolution.
"""

from __future__ import annotations

import functools
import re

CATEGORIES = (
    "matmul_conv",
    "fusion",
    "collective",
    "copy",
    "infeed_outfeed",
    "host_offload",
    "host_transfer",
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
# Words (whole) that name a matrix multiply, a convolution or an attention kernel.
_MATMUL_WORDS = frozenset(
    {"conv", "convolution", "convolve", "dot", "matmul", "attn", "attention", "fmha", "xmma"}
)
# Words that name one when they begin a word: sgemm, hgemm, igemm, gemmk; conv2d; fft2d
# (cuDNN's FFT convolutions); Cijk_... (rocBLAS/Tensile GEMM kernels).
_MATMUL_WORD_START = re.compile(r"^([a-z]{0,2}gemm|conv\d*d$|fft\d*d|cijk|cublas|cutlass|cudnn)")
# Text that names one wherever it appears (long enough to mean nothing else).
_MATMUL_TEXT = ("im2col", "im3d2col", "flash_attn", "fused_attn", "cublas", "cutlass")
# Collective communication, by name (lowercase text anywhere in a kernel's, op's or event's
# name): XLA's HLO ops (all-reduce.3, all-gather-start, collective-permute-done), NCCL/RCCL
# kernels, and camel-case runtime names lower-cased (AllReduce, CollectivePermute). The one list:
# the device model's categories and a pod's collective waits (``inputs.pod.summary``) read it.
COLLECTIVE_NAMES = (
    "nccl",
    "rccl",
    "all-reduce",
    "allreduce",
    "all-gather",
    "allgather",
    "reduce-scatter",
    "reducescatter",
    "all-to-all",
    "alltoall",
    "collective-permute",
    "collectivepermute",
)
_COPY_TEXT = ("copybuffer", "memset", "fillbuffer")
# Memcpy kinds between host and device memory: Kineto "Memcpy HtoD (Pageable -> Device)",
# XSpace (CUPTI via XLA) "MemcpyH2D". Host-to-host is the host's own copy, staged for the device.
_HOST_DEVICE_COPY = ("htod", "dtoh", "htoh", "h2d", "d2h", "h2h")
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+|[0-9]+")


def words(name: str) -> list[str]:
    """A name's words, lower-cased: split at non-alphanumerics and lower-to-upper changes."""
    return [w.lower() for w in _WORD.findall(name)]


@functools.lru_cache(maxsize=65536)
def short_name(name: str) -> str:
    """A C++ kernel's function name without return type, template arguments or parameters.

    ``void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<...>, long>(..., long)``
    -> ``Eigen::internal::EigenMetaKernel``. A name with no ``<`` or ``(`` (an HLO op, a
    Tensile kernel, ``Memcpy HtoD (Pageable -> Device)``: no ``<`` or ``::``) is returned as it
    is; so is one this cannot read (unbalanced brackets).
    """
    if "<" not in name and "::" not in name:
        return name
    out: list[str] = []
    depth = 0
    for index, char in enumerate(name):
        if char == "<":
            if name.startswith("<<", index) and depth == 0 and "operator" in "".join(out[-10:]):
                out.append(char)
                continue
            depth += 1
        elif char == ">":
            if depth == 0:
                out.append(char)  # operator-> and the like: keep
                continue
            depth -= 1
        elif char == "(" and depth == 0:
            return _up_to_parameters(name, index, "".join(out))
        elif depth == 0:
            out.append(char)
    if depth:
        return name
    return _drop_return_type("".join(out).strip()) or name


def _up_to_parameters(name: str, index: int, kept: str) -> str:
    """``short_name`` of ``name`` whose text outside template arguments is ``kept`` up to the
    ``(`` at ``index``: the parameter list, unless it opens "(anonymous namespace)", a scope
    (the rest of the name is read on from there)."""
    scope = "(anonymous namespace)"
    if name.startswith(scope, index):
        skip = len(scope)
        rest = short_name(name[index + skip :]) if index + skip < len(name) else ""
        return _drop_return_type(kept + scope + rest) or name
    return _drop_return_type(kept.rstrip()) or name


def _drop_return_type(text: str) -> str:
    """The last space-separated part, outside "(anonymous namespace)": the qualified name."""
    protected = text.replace("(anonymous namespace)", "(anonymous\0namespace)")
    return protected.rsplit(" ", 1)[-1].replace("\0", " ").strip()


def categorize(hlo_category: str | None, name: str, kineto_cat: str | None = None) -> str:
    """One of ``CATEGORIES`` for an op, from its XLA category where known, else its name."""
    if hlo_category:
        return _by_hlo_category(hlo_category.lower(), name)
    return _categorize_name(name, kineto_cat)


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


@functools.lru_cache(maxsize=65536)
def _categorize_name(name: str, kineto_cat: str | None) -> str:
    """A kernel's category from its function name's words (see the module docstring)."""
    function = short_name(name)
    if function.endswith("::kentry"):  # ck_tile's entry point: the kernel is its template argument
        function = name
    text = function.lower()
    copy = _copy_category(name, text, kineto_cat)
    if copy is not None:
        return copy
    return _by_words(function, text)


def _copy_category(name: str, text: str, kineto_cat: str | None) -> str | None:
    """A memset or memcpy: a copy, or a host transfer where it crosses host and device; None
    for any other kernel."""
    if kineto_cat == "gpu_memset":
        return "copy"
    if kineto_cat == "gpu_memcpy" or text.startswith("memcpy"):
        full = name.lower()
        return "host_transfer" if any(kind in full for kind in _HOST_DEVICE_COPY) else "copy"
    return None


def _by_words(function: str, text: str) -> str:
    """A kernel's category from its function name (``text``: lower-cased) and its words."""
    if any(k in text for k in COLLECTIVE_NAMES):
        return "collective"
    parts = words(function)
    if any(w in _MATMUL_WORDS or _MATMUL_WORD_START.match(w) for w in parts) or any(
        k in text for k in _MATMUL_TEXT
    ):
        return "matmul_conv"
    if "copy" in parts or any(k in text for k in _COPY_TEXT):
        return "copy"
    if "fusion" in parts:
        return "fusion"
    return "other"
