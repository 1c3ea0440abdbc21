"""The device sections of the reports as the pipeline makes them (``xlaprof.tables.device.view``):
the rows every renderer shows of a capture's devices, the same for a pod read from its hosts'
files as in memory."""

from __future__ import annotations

from pathlib import Path

from builders import POD_COPIES, STRETCH, pod_logdir
from helpers import sample_capture, shared_trace

from xlaprof.inputs.traces import load_trace


def test_the_header_counts_the_devices_of_the_table_below_it() -> None:
    from xlaprof.report.devices import device_words
    from xlaprof.tables.device import view as devices

    # GIVEN a CPU capture: no device plane, its XLA ops ran on the host's CPU
    trace = load_trace(sample_capture("recompile_varying_batch"))
    assert trace.devices is None or trace.devices.empty
    # WHEN its header is written THEN it counts the one device its device table shows
    rows = devices.device_rows(trace)
    assert [row["device"] for row in rows] == ["CPU"]
    view = devices.device_view(trace)
    assert (view.device_count, view.host_cpu) == (1, True)
    assert "1 device(s) (the host CPU: no device plane)" in device_words(view).capture
    # AND a capture with device planes counts them, with nothing said of the host CPU
    tpu = load_trace(shared_trace("xprof_tpu_inference_2_v1.xplane.pb"))
    assert tpu.devices is not None and not tpu.devices.empty
    line = device_words(devices.device_view(tpu)).capture
    assert f"{len(tpu.devices)} device(s)" in line and "host CPU" not in line


def test_the_view_holds_facts_and_the_report_words_them() -> None:
    from xlaprof.report.devices import device_words
    from xlaprof.tables.device import view as devices

    # GIVEN a TPU capture's device view (the tables hold numbers and codes)
    tpu = load_trace(shared_trace("xprof_tpu_inference_2_v1.xplane.pb"))
    view = devices.device_view(tpu)
    # THEN its facts are the trace's own: its event count, its devices by kind
    assert view.events == tpu.event_count and view.hosts == len(tpu.hosts)
    assert sum(count for _, count in view.device_kinds) == len(tpu.devices)
    # AND every note the report writes of it is made of those facts
    words = device_words(view)
    assert words.device_types == ", ".join(f"{n} x {kind}" for kind, n in view.device_kinds)
    if view.line_coverage is not None:
        assert words.line_note is not None
        assert words.line_note.startswith(f"{view.line_coverage:.1%} of device op time")
    if view.traced is not None:
        assert words.verdict is not None
        assert f"{view.traced.steps} of {view.traced.known} steps" in words.verdict


def test_the_reports_say_the_same_of_a_pod_as_of_its_hosts_in_memory(tmp_path: Path) -> None:
    from xlaprof.report.devices import device_words
    from xlaprof.tables.device import view as devices

    # GIVEN four hosts, one slower, loaded as a pod (aggregates) and in memory (every row)
    pod_logdir(tmp_path, 4, {"host-2": {"stretch": STRETCH}})
    lazy = load_trace(tmp_path, lazy=True, workers=2)
    eager = load_trace(tmp_path, lazy=False)
    # WHEN the device sections are made THEN they say the same: medians exact, not binned
    for section in (
        devices.step_rows,
        devices.tracing_rows,
        devices.traced_steps,
        devices.tracing_lazy,
        devices.autotune_facts,
        devices.bottleneck_rows,
        devices.bottleneck_device_rows,
        lambda trace: devices.bottleneck_hidden(trace, 3),
    ):
        got, want = section(lazy), section(eager)
        assert got == want, section.__name__
    # AND the words made of the whole view, but for the capture's files (the pod is read from
    # its files, not one file)
    got, want = device_words(devices.device_view(lazy)), device_words(devices.device_view(eager))
    assert got.capture.split("(", 1)[1] == want.capture.split("(", 1)[1]
    for name in ("meta", "tracing_title", "verdict", "autotune_note", "bottleneck_note"):
        assert getattr(got, name) == getattr(want, name), name
    assert devices.step_rows(lazy)[0]["steps"] == 4 * 2 * POD_COPIES  # a count, as a number
    assert devices.bottleneck_device_rows(lazy)  # four hosts' devices, from their workers
