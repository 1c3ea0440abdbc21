"""Capturing from a job's profiler server (``xlaprof.capture.remote``): which trace file is which
service's."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers import sample_capture

from xlaprof.capture.remote import Service, has_events


def test_a_service_takes_only_the_file_named_exactly_for_it(tmp_path: Path) -> None:
    # GIVEN a real capture saved as XProf's client names host:9012's file
    named = tmp_path / "host_9012.xplane.pb"
    shutil.copy(sample_capture("healthy_loop"), named)
    # THEN it is host:9012's capture, and not host:901's (a prefix of its name)
    assert has_events([named], Service("host", 9012))
    assert not has_events([named], Service("host", 901))
