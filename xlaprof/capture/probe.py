"""What the training process runs on: versions, the C++ ABI, the device and its memory."""

from __future__ import annotations

import logging
import sys
from typing import Any

from xlaprof.capture.runtime import runtime

log = logging.getLogger(__name__)


def describe_device(info: Any) -> None:
    """Fill ``info``'s device fields (a ``RunInfo``); a failure becomes a run warning."""
    try:
        runtime().describe_device(info)
    except Exception as error:
        info.warnings.append(f"device not described: {error}")


def device_memory() -> dict[str, int] | None:
    """Device memory in use and its limit (TPU HBM); None where the backend does not say."""
    return runtime().device_memory()


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
