"""`xlaprof view` serves traces in the XProf UI: the sample runs', a single capture file's."""

from __future__ import annotations

from helpers import SAMPLE_RUNS, SAMPLES, TPU, sample_capture, shared_trace, view_runs


def test_view_serves_every_traced_run() -> None:
    # GIVEN the sample runs, each traced (--trace-steps 4:6)
    traced = sorted(name for name in SAMPLE_RUNS if sample_capture(name))
    assert len(traced) >= 4
    # WHEN the folder holding them is viewed THEN the UI lists each traced run
    assert view_runs(SAMPLES / "runs") == [f"{name}/" for name in traced]


def test_view_links_a_single_capture_file_into_a_logdir() -> None:
    # GIVEN one capture file WHEN it is viewed THEN the file is linked into a temporary logdir
    # the UI can read, and the UI lists it
    assert view_runs(shared_trace(TPU)) == ["xprof_tpu_inference_2_v1/"]
