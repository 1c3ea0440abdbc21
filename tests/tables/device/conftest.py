"""A capture of two hosts built event by event, for the device tables' tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import two_gpu_hosts


@pytest.fixture
def two_hosts(tmp_path: Path) -> Path:
    """GPU:4 on host-a (a 19.9 ms step) and GPU:6 on host-b (21.3 ms), 650 ms apart."""
    return two_gpu_hosts(tmp_path)
