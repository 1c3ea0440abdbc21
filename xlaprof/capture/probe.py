"""What the training process runs on: versions, the C++ ABI, the device and its memory."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)


def describe_device(info: Any) -> None:
    """Fill ``info``'s device fields (a ``RunInfo``); a failure becomes a run warning."""
    try:
        import torch_xla.runtime as xr

        info.device_kind = xr.device_type()
        info.device_count = xr.global_runtime_device_count()
        info.rank = xr.global_ordinal()
        info.device_memory = device_memory()
    except Exception as error:
        info.warnings.append(f"device not described: {error}")


def device_memory() -> dict[str, int] | None:
    """Device memory in use and its limit (TPU HBM); None where the backend does not say."""
    try:
        import torch_xla.core.xla_model as xm

        # Read as a mapping: some runtimes also report a key torch_xla's MemoryInfo lacks.
        info: Mapping[str, Any] = xm.get_memory_info()
    except Exception as error:
        log.debug("no device memory info: %s", error)
        return None
    used, limit = info.get("bytes_used"), info.get("bytes_limit")
    if not used or not limit:
        return None
    memory = {"bytes_used": int(used), "bytes_limit": int(limit)}
    if info.get("peak_bytes_used"):
        memory["peak_bytes_used"] = int(info["peak_bytes_used"])
    return memory


def package_version(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def module_version(name: str) -> str | None:
    module = sys.modules.get(name)
    return getattr(module, "__version__", None) if module is not None else None


def cxx11_abi() -> bool | None:
    torch = sys.modules.get("torch")
    try:
        return bool(torch._C._GLIBCXX_USE_CXX11_ABI) if torch is not None else None
    except AttributeError:
        return None
