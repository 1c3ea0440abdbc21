"""Loading a pod's captures (``xlaprof.inputs.pod``): per-host workers summarize each host
into a cache beside its capture, lazily as one frame per host, the same as in memory.

The hosts are copies of a real CPU capture (``builders.write_pod_host``), repeated so each holds
six steps. Expected values are read from the written XSpaces themselves (StepMarker end times),
never from what xlaprof printed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from builders import POD_COPIES, STRETCH, marker_walls, pod_logdir
from helpers import MI300, cli, jax_cpu_sample, shared_trace, without_saved_line

from xlaprof.errors import BadCapture
from xlaprof.inputs import pod
from xlaprof.inputs.traces import load_trace
from xlaprof.model.request import PodSettings
from xlaprof.model.trace import Trace
from xlaprof.tables.stragglers import stragglers


def _environment() -> PodSettings:
    """What a command reads of the (monkeypatched) environment: the pod's settings."""
    return PodSettings.of(os.environ)


def _pod_parts(path: Path) -> list:
    """``path`` loaded as a command loads it, with the environment's pod settings."""
    from xlaprof.inputs.paths import DEFAULT_MAX_INPUT_BYTES, load_parts

    return load_parts([path], DEFAULT_MAX_INPUT_BYTES, 2, pod=_environment())


def _three_hosts_both_ways(tmp_path: Path) -> tuple[Trace, Trace]:
    """Three hosts (host-1 stretched) written to ``tmp_path``, loaded as a pod (two workers)
    and in memory: the pair most tests here compare."""
    pod_logdir(tmp_path, 3, {"host-1": {"stretch": STRETCH}})
    return load_trace(tmp_path, lazy=True, workers=2), load_trace(tmp_path, lazy=False)


def test_lazy_load_matches_the_in_memory_one(tmp_path: Path) -> None:
    markers = pod_logdir(tmp_path, 3)
    lazy = load_trace(tmp_path, lazy=True, workers=2)
    eager = load_trace(tmp_path, lazy=False)
    assert lazy.source is not None and eager.source is None
    assert lazy.hosts == eager.hosts == ["host-0", "host-1", "host-2"]
    assert lazy.events.npartitions == 3  # one partition per host
    # every host's events are in its cache, beside its capture
    for summary in lazy.source.load.summaries:
        assert Path(summary.cache).parent == Path(summary.path).parent
        assert summary.events == int((eager.events["host"] == summary.host).sum())
    steps = pod.host_steps(lazy)
    key = ["host", "device", "step"]
    assert (
        steps.sort_values(key)
        .reset_index(drop=True)
        .equals(pod.host_steps(eager).sort_values(key).reset_index(drop=True))
    )
    # step walls are the marker-to-marker times of the capture itself
    host_rows = steps[steps["device"] == "host"]
    mine = host_rows[host_rows["host"] == "host-1"].set_index("step")["wall_ms"]
    for step, wall in marker_walls(markers["host-1"]).items():
        assert mine[step] == pytest.approx(wall, abs=1e-6)
    # filters apply before events are read, and mean the same in both modes
    window = (markers["host-2"][1], markers["host-2"][2])
    for filters in (
        {"hosts": ["host-2"], "steps": [2, 3]},
        {"names": ["StepMarker"]},
        {"hosts": ["host-0"], "start_ns": window[0], "end_ns": window[1]},
    ):
        got, want = lazy.select(**filters), eager.select(**filters)
        assert len(got) == len(want) > 0
        assert sorted(got["start_ns"]) == sorted(want["start_ns"])
    assert len(lazy.events[lazy.events["name"] == "StepMarker"].compute()) == 3 * 2 * POD_COPIES
    # a second load reads the summaries back from the caches
    again = load_trace(tmp_path, lazy=True, workers=1)
    assert all(s.cache_hit for s in again.source.load.summaries)
    assert (
        pod.host_steps(again)
        .sort_values(key)
        .reset_index(drop=True)
        .equals(steps.sort_values(key).reset_index(drop=True))
    )


def test_every_host_broken_is_an_input_error(tmp_path: Path) -> None:
    session = tmp_path / "plugins" / "profile" / "session"
    session.mkdir(parents=True)
    for i in range(2):
        (session / f"host-{i}.xplane.pb").write_bytes(b"\xff\xff\xff\xff")
    out = cli("analyze", str(tmp_path), env={"XLAPROF_LAZY_BYTES": "0"})
    assert out.returncode == BadCapture.exit_code, out.stderr
    assert "every capture file is unreadable" in out.stderr and "Traceback" not in out.stderr


def _same(left, right, key=None) -> bool:  # type: ignore[no-untyped-def]
    """Two frames hold the same rows (any order of rows, NaN equal to NaN)."""
    key = key or [c for c in ("host", "device", "step") if c in left.columns]
    left = left.sort_values(key, kind="stable").reset_index(drop=True).astype(object)
    right = right.sort_values(key, kind="stable").reset_index(drop=True).astype(object)
    return left.where(left.notna(), None).equals(right.where(right.notna(), None))


def test_a_pod_keeps_its_per_step_rows_on_disk_and_reads_them_when_asked(tmp_path: Path) -> None:
    from xlaprof.model.ondisk import TABLES, held

    # GIVEN three hosts loaded as a pod and in memory
    lazy, eager = _three_hosts_both_ways(tmp_path)
    # THEN the parent holds no per-step rows: each host's tables are files beside its cache
    summary = lazy.summary()
    assert held(summary, "steps") is None and held(summary, "tracing") is None
    assert held(lazy, "step_bounds") is None
    for host in lazy.source.load.summaries:
        assert host.frames is None and sorted(host.tables) == sorted(TABLES)
        assert all(Path(path).parent == Path(host.path).parent for path in host.tables.values())
    # AND asking for every row reads them back: the same rows as the in-memory trace
    assert summary.rows("steps") == len(eager.device_steps()) > 0
    assert _same(lazy.device_steps(), eager.device_steps())
    assert _same(lazy.tracing_vs_device(), eager.tracing_vs_device())
    assert _same(lazy.step_bounds.astype({"host": str}), eager.step_bounds.astype({"host": str}))
    assert _same(lazy.step_times(), eager.step_times())
    # AND both kinds of event source answer alike: hosts, event counts, filtered events
    assert lazy.hosts == eager.hosts and lazy.event_count == eager.event_count > 0
    host, columns = eager.hosts[1], ["host", "name", "start_ns", "duration_ns"]
    picked = {"hosts": [host], "plane_kinds": ["host"], "columns": columns}
    assert len(eager.select(**picked)) > 0
    assert _same(lazy.select(**picked), eager.select(**picked), key=["start_ns", "name"])
    # AND only the pod's source keeps straggler rows and a workers' record
    assert not eager.events_source.row_store().tables
    assert eager.events_source.load_record(eager) == {}
    assert lazy.events_source.row_store().count("host_steps") == len(pod.host_steps(eager)) > 0
    assert [h["host"] for h in lazy.events_source.load_record(lazy)["hosts"]] == eager.hosts


def test_every_event_source_member_answers_a_pod_and_a_trace_in_memory_with_a_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pandas as pd

    from xlaprof.model.rowstore import RowStore
    from xlaprof.tables.timeline import EVENT_COLUMNS, trace_timeline

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the cache key lives there
    # GIVEN three hosts loaded as a pod and in memory
    lazy, eager = _three_hosts_both_ways(tmp_path)
    for trace in (lazy, eager):
        source = trace.events_source
        # WHEN each member of the contract is asked THEN each answers with a value, never None
        held = source.held_events()
        assert isinstance(held, pd.DataFrame)
        assert isinstance(source.load_record(trace), dict)
        assert isinstance(source.row_store(), RowStore)
        hosts = source.step_hosts(trace)
        view = source.step_view(trace, EVENT_COLUMNS)
        assert sorted(view.hosts) == hosts
        timeline = source.step_timeline(trace, lambda t: trace_timeline(t.step_view(EVENT_COLUMNS)))
        assert isinstance(timeline, pd.DataFrame) and len(timeline)
    # AND the pod holds no event in memory, where the other holds every one; the step timeline
    # reads one host of the pod, every host of the other, and both give its timeline
    assert lazy.events_source.held_events().empty
    assert len(eager.events_source.held_events()) == eager.event_count == lazy.event_count
    assert lazy.events_source.step_hosts(lazy) == lazy.hosts[:1]
    assert eager.events_source.step_hosts(eager) == eager.hosts == lazy.hosts


def test_the_analyzers_find_the_same_in_a_pod_as_in_its_hosts_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xlaprof.model.pod import CachedEvents
    from xlaprof.model.trace import HeldEvents
    from xlaprof.pipeline import analyze_inputs

    # GIVEN three hosts analyzed as a pod (per-step rows on disk) and in memory
    pod_logdir(tmp_path, 3, {"host-1": {"stretch": STRETCH}})

    def analyzed(lazy_bytes: str) -> tuple[list, object, object]:
        monkeypatch.setenv("XLAPROF_LAZY_BYTES", lazy_bytes)
        (made,) = analyze_inputs(_pod_parts(tmp_path))
        findings = [(f.kind.value, f.title, f.evidence) for f in made.result.findings]
        return findings, made.result, made.trace

    pod_findings, pod_result, pod_trace = analyzed("0")
    memory_findings, memory_result, memory_trace = analyzed(str(10**12))
    assert isinstance(pod_trace.events_source, CachedEvents)
    assert isinstance(memory_trace.events_source, HeldEvents)
    # AND the pod's result names its per-step rows' files; the in-memory one holds them
    assert "device_steps" in pod_result.store and not memory_result.store.tables
    assert _same(pod_result.device_steps(), memory_result.device_steps())
    # THEN the findings (the capture's bottleneck analyzers among them) and the step story
    # are the same
    assert pod_findings == memory_findings
    assert pod_result.timeline.equals(memory_result.timeline)


def test_a_pods_stragglers_and_skew_taken_a_few_steps_at_a_time_are_every_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xlaprof.pipeline import analyze_parts
    from xlaprof.tables.hosts import host_skew

    # GIVEN a pod whose straggler rows are read two steps at a time
    pod_logdir(tmp_path, 3, {"host-0": {"stretch": STRETCH}})
    trace = load_trace(tmp_path, lazy=True, workers=2)
    monkeypatch.setattr(pod, "STEP_CHUNK_ROWS", 2 * 2 * 3)  # 2 steps x (host, CPU) x 3 hosts
    # WHEN its skew and stragglers are computed in ranges of steps
    skew, late = pod.step_tables(trace)
    # THEN they are the tables made of every row at once
    every = pod.host_steps(trace)
    assert _same(late, stragglers(every)) and len(late) > 2
    assert _same(skew, host_skew(trace.step_times())) and len(skew) > 2
    # AND the analysis of the pod uses them, and still gives every per-host row on demand

    monkeypatch.setenv("XLAPROF_LAZY_BYTES", "0")
    (result,) = analyze_parts(_pod_parts(tmp_path))
    assert result.host_steps is None  # not held: named by the result's row store
    assert _same(result.host_steps_frame(), every)
    assert _same(result.stragglers, late)


def test_a_pod_of_real_gpu_captures_has_the_framework_ops_of_the_capture_in_memory(
    tmp_path: Path,
) -> None:
    # GIVEN two hosts, each the real MI300X JAX capture (its ops carry JAX's name stack)
    capture = shared_trace(MI300)
    session = tmp_path / "plugins" / "profile" / "session"
    session.mkdir(parents=True)
    for host in ("host-a", "host-b"):
        (session / f"{host}.xplane.pb").write_bytes(capture.read_bytes())
    # WHEN it is loaded as a pod (workers decode without args) and in memory
    lazy = load_trace(tmp_path, lazy=True, workers=2)
    eager = load_trace(tmp_path, lazy=False)
    # THEN the device ops, framework ops included, are the same
    got, want = lazy.device_ops(), eager.device_ops()
    assert got["framework_op"].notna().any()
    assert _same(got, want, key=["host", "device", "name", "category"])


def test_a_pods_per_step_tables_past_their_bounds_keep_the_chosen_rows_and_every_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from xlaprof.model.result import AnalysisResult
    from xlaprof.pipeline import analyze_parts
    from xlaprof.report import render
    from xlaprof.report.json_out import analysis_json
    from xlaprof.tables import bounded

    # GIVEN three hosts of six steps each, host-1 slower at everything, analyzed as a pod
    markers = pod_logdir(tmp_path, 3, {"host-1": {"stretch": STRETCH}})
    monkeypatch.setenv("XLAPROF_LAZY_BYTES", "0")

    def analyzed() -> tuple[AnalysisResult, str, dict]:
        (part,) = analyze_parts(_pod_parts(tmp_path))
        result = AnalysisResult([part])
        return result, render(result, "console"), analysis_json(result)

    whole, whole_text, whole_doc = analyzed()
    # WHEN its per-step tables are longer than their bounds (bounds made small, the data real)
    for name, value in {
        "MAX_TIMELINE_ROWS": 4,
        "TIMELINE_FIRST_STEPS": 1,
        "TIMELINE_TRACED_SHOWN": 1,
        "MAX_STRAGGLER_ROWS": 3,
        "STRAGGLER_FIRST_ROWS": 1,
        "MAX_SKEW_ROWS": 3,
        "SKEW_FIRST_ROWS": 1,
        "MAX_HEATMAP_STEPS": 3,
        "HEATMAP_FIRST_STEPS": 1,
    }.items():
        monkeypatch.setattr(bounded, name, value)
    cut, cut_text, cut_doc = analyzed()
    part, every = cut.parts[0], whole.parts[0]
    # THEN nothing was cut where the tables fit, and every table is within its bound here
    assert not every.rows_kept and "rows_kept" not in whole_doc
    assert len(part.timeline) <= 4 and len(part.stragglers) <= 3 and len(part.host_skew) <= 3
    kept = cut_doc["rows_kept"]
    assert kept["timeline"]["total"] == len(every.timeline) > 4
    assert kept["stragglers"]["total"] == cut_doc["stragglers_total"] == len(every.stragglers)
    assert cut_doc["host_skew_total"] == len(every.host_skew)
    assert len(cut_doc["timeline"]) == kept["timeline"]["kept"] == len(part.timeline)
    # AND the rows kept are the tables' own rows: the first step, the median steady step, and
    # the slowest host's worst step (host-1's longest, from the captures' own step markers)
    assert part.timeline.equals(every.timeline.loc[part.timeline.index])
    assert {0, every.story.median_step} <= set(part.timeline["step"])
    behind = {step: wall * (STRETCH - 1) for step, wall in marker_walls(markers["host-0"]).items()}
    worst = max(behind, key=behind.__getitem__)
    on_host = part.stragglers[part.stragglers["device"] == "host"]
    assert worst in set(on_host["step"])
    assert set(part.frames["host_steps"]["step"]) <= set(every.frames["host_steps"]["step"])
    assert part.frames["host_steps"]["step"].nunique() <= 3
    # AND the HTML report's figures draw the rows kept: the timeline's steps, the heat map's
    from xlaprof.report.figures import result_figures

    drawn = dict(result_figures(part))
    assert list(drawn["timeline"].data[-1].x) == list(part.timeline["step"])
    heat = drawn["host-steps"].data[0]
    assert sorted(map(int, heat.x)) == sorted(set(part.frames["host_steps"]["step"]))
    assert set(drawn["host-steps"].data[1].x) <= set(heat.x)  # outlines on drawn steps only
    # AND the notebook still has every row
    assert part.timeline_frame().equals(every.timeline)
    assert _same(part.stragglers_frame(), every.stragglers)
    # AND its figures draw the rows kept, as the HTML report does, and say so (a figure of
    # every row of a long run is what the bounds are for); those of the whole run say nothing
    from xlaprof.api import Analysis

    notebook, whole_book = Analysis.from_result(part), Analysis.from_result(every)
    for figure, name, what in (
        (notebook.plot_timeline(), "timeline", "steps"),
        (notebook.plot_host_steps(), "frame:host_steps", "host steps"),
    ):
        drawn_x = figure.data[-1].x if name == "timeline" else figure.data[0].x
        shown = drawn["timeline"].data[-1].x if name == "timeline" else heat.x
        assert list(drawn_x) == list(shown)
        said = f"downsampled: {kept[name]['kept']:,} of {kept[name]['total']:,} {what} drawn"
        assert [a.text for a in figure.layout.annotations if said in a.text], name
    assert len(notebook.plot_timeline().data[-1].x) == len(part.timeline) < len(every.timeline)
    for figure in (whole_book.plot_timeline(), whole_book.plot_host_steps()):
        assert not [a for a in figure.layout.annotations if "downsampled" in a.text]
    # AND the console says the same of every step: the story and counts above the timeline,
    # the warm-up steps and the median steady step in it, and the stragglers line
    head = whole_text[: whole_text.index("Step timeline")]
    assert cut_text.startswith(head)
    said = whole_text.splitlines()
    median = f"{every.story.median_step} (median)"
    listed = [line for line in said if line.split(" ")[0] in ("0", "1") or line.startswith(median)]
    assert len(listed) == 3 and set(listed) <= set(cut_text.splitlines())
    (line,) = [line for line in said if line.startswith("Stragglers (3 hosts): host-1 is")]
    assert line in cut_text.splitlines()
    # AND a saved document renders the same text
    saved = AnalysisResult.from_json(json.loads(json.dumps(cut_doc)))
    assert render(saved, "console") == cut_text
    # AND the steady step (``xlaprof mcp``'s steps tool) is that of every row, cut or not,
    # and the saved document carries it: every steady row counted (more than the cut timeline
    # keeps), the story's median step
    all_steady, kept_steady = (
        int((t["steady"] & (t["step"] >= 2)).sum()) for t in (every.timeline, part.timeline)
    )
    assert cut_doc["view"]["steady"] == whole_doc["view"]["steady"]
    assert saved.parts[0].steady == part.steady == every.steady
    assert every.steady is not None and every.steady.steps == all_steady > kept_steady
    assert every.steady.median_step == every.story.median_step
    # AND the result carries the stragglers' and host skew's figures over every row, cut or
    # not (the renderers only show them): the same figures both ways, host-1 the straggler
    figures = whole_doc["summaries"]
    assert cut_doc["summaries"] == figures
    assert kept["stragglers"]["summary"] == figures["stragglers"]
    assert figures["stragglers"]["rows"] == len(every.stragglers)
    assert figures["stragglers"]["slowest_host"] == figures["host_skew"]["slowest_host"] == "host-1"
    assert figures["host_skew"]["steps"] == len(every.host_skew)
    # AND a document saved before it carried them renders the same text
    from xlaprof.inputs.saved import load_saved

    older = {key: value for key, value in whole_doc.items() if key != "summaries"}
    (tmp_path / "older.json").write_text(json.dumps(older))
    loaded = load_saved(tmp_path / "older.json", 2**30)
    assert without_saved_line(render(loaded, "console")) == whole_text


def test_a_pods_step_view_leaves_out_the_partial_steps_its_step_tables_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xlaprof.inputs.paths import load_parts

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the cache key lives there
    monkeypatch.setenv(pod.LAZY_BYTES_ENV, "0")  # a pod, read by workers
    # GIVEN a pod of two real captures (the repository's JAX-on-CPU capture, copied unchanged
    # as two hosts), given as a path is to xlaprof analyze: a capture starts and stops
    # mid-step, so each host's first and last step are partial
    session = tmp_path / "logdir" / "plugins" / "profile" / "session"
    session.mkdir(parents=True)
    for host in ("host-0", "host-1"):
        shutil.copyfile(jax_cpu_sample(), session / f"{host}.xplane.pb")
    annotated = json.loads(jax_cpu_sample("capture_jax_cpu.json").read_text())["steps_annotated"]
    (part,) = load_parts([tmp_path / "logdir"], 1 << 30, pod=_environment())
    trace = part.trace
    assert trace is not None and trace.source is not None and trace.partial_edges
    # WHEN the step timeline's view of it (its first host) is asked for its step times
    view = trace.step_view()
    # THEN they are the pod's own step times of that host: the script's steps without the
    # first and the last, as the pod's host tables count them
    steps = view.step_times()
    assert list(steps["host"].astype(str).unique()) == ["host-0"]
    assert list(steps["step"]) == annotated[1:-1]
    mine = trace.step_times()
    mine = mine[mine["host"].astype(str) == "host-0"]
    assert list(steps["wall_s"]) == list(mine["wall_s"])


def test_a_pods_first_host_timeline_is_made_once_kept_beside_its_cache_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pandas as pd

    from xlaprof.model.ondisk import TIMELINE
    from xlaprof.tables.timeline import EVENT_COLUMNS, trace_timeline

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the cache key lives there
    # GIVEN three hosts loaded as a pod (its workers make no timeline), and in memory
    lazy, eager = _three_hosts_both_ways(tmp_path)
    assert not any(TIMELINE in s.tables for s in lazy.source.load.summaries)

    def of_events(trace: Trace) -> pd.DataFrame:  # as the pipeline makes a capture's
        return trace_timeline(trace.step_view(EVENT_COLUMNS))

    def never(trace: Trace) -> pd.DataFrame:
        raise AssertionError("the kept timeline must be read, not made")

    # WHEN its first host's timeline is asked for
    made = lazy.events_source.step_timeline(lazy, of_events)
    # THEN it is the first host's timeline of the trace in memory (made from its events)
    want = trace_timeline(eager)
    assert len(made) >= POD_COPIES
    pd.testing.assert_frame_equal(made, want, check_exact=True)
    # AND it is kept beside the first host's cache only, and a second load reads it there
    first, *others = lazy.source.load.in_order()
    assert Path(first.tables[TIMELINE]).parent == Path(first.path).parent
    assert not any(TIMELINE in s.tables for s in others)
    again = load_trace(tmp_path, lazy=True, workers=2)
    assert again.source.load.in_order()[0].cache_hit
    read = again.events_source.step_timeline(again, never)
    pd.testing.assert_frame_equal(read, want, check_exact=True, check_categorical=False)
    # AND a damaged one is never read: the cache is still reused, the timeline made again
    Path(first.tables[TIMELINE]).write_bytes(b"PAR1 not a table")
    third = load_trace(tmp_path, lazy=True, workers=2)
    kept = third.source.load.in_order()[0]
    assert kept.cache_hit and TIMELINE not in kept.tables
    pd.testing.assert_frame_equal(
        third.events_source.step_timeline(third, of_events),
        want,
        check_exact=True,
        check_categorical=False,
    )


def _three_ways(folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict, dict]:
    """The --json documents of the pod in ``folder`` analyzed in memory, as a pod read by
    workers (its caches written) and as a pod again (the caches read back)."""
    from xlaprof.model.result import AnalysisResult
    from xlaprof.pipeline import analyze_parts
    from xlaprof.report.json_out import analysis_json

    monkeypatch.setenv("HOME", str(folder / "home"))  # the cache key lives there

    def analyzed(lazy_bytes: str) -> dict:
        monkeypatch.setenv(pod.LAZY_BYTES_ENV, lazy_bytes)
        (part,) = analyze_parts(_pod_parts(folder))
        return analysis_json(AnalysisResult([part]))

    memory = analyzed(str(10**12))
    written, read = analyzed("0"), analyzed("0")
    assert "pod" in written["trace"] and "pod" not in memory["trace"]
    assert all(host["cache_hit"] for host in read["trace"]["pod"]["hosts"])
    return memory, written, read


def test_a_pods_device_time_by_line_is_that_of_its_hosts_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    # GIVEN four hosts, each a copy of a real CPU capture whose embedded programs name the
    # source lines of their instructions (the copies share one hostname: named by file)
    pod_logdir(tmp_path, 4)
    # WHEN it is analyzed in memory, as a pod (its caches written), and as a pod again (the
    # caches read back)
    memory, written, read = _three_ways(tmp_path, monkeypatch)
    # THEN the documents place the same device time at the same lines, both ways
    keys = ("device_time_by_line", "device_time_by_line_total", "device_time_by_line_coverage")
    want = {key: memory["trace"][key] for key in keys}
    assert want["device_time_by_line"] and want["device_time_by_line_coverage"] > 0
    assert any(row["file"] for row in want["device_time_by_line"])
    for document in (written, read):
        assert {key: document["trace"][key] for key in keys} == want
        assert document["view"]["devices"]["lines"] == memory["view"]["devices"]["lines"]
    # AND the rows per host and device name each host as the trace in memory names it
    lazy, eager = load_trace(tmp_path, lazy=True, workers=2), load_trace(tmp_path, lazy=False)
    got, mine = lazy.device_time_by_line(per_device=True), eager.device_time_by_line(True)
    assert sorted(got["host"].unique()) == eager.hosts == lazy.hosts
    key = ["host", "device", "category", "file", "line", "module"]
    assert _same(got, mine, key=key) and len(got) > len(want["device_time_by_line"])


@pytest.mark.parametrize("slow", [{}, {"host-2": {"stretch": STRETCH}}], ids=["even", "straggler"])
def test_a_pods_host_skew_leaves_out_the_cut_steps_as_its_hosts_in_memory_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow: dict
) -> None:
    from xlaprof.report.console import stragglers_line

    # GIVEN four hosts, copies of a real CPU capture whose first and last steps the capture
    # window cuts (host-2 stretched 1.5x, a straggler, in the second case)
    pod_logdir(tmp_path, 4, slow)
    # WHEN it is analyzed in memory, as a pod (its caches written), and as a pod again (the
    # caches read back)
    memory, written, read = _three_ways(tmp_path, monkeypatch)

    def skew(document: dict) -> dict:
        return {
            "rows": document["host_skew"],
            "total": document["host_skew_total"],
            "summary": document["summaries"]["host_skew"],
            "view": document["view"]["tables"]["host_skew"],
            "stragglers": document["summaries"]["stragglers"],
            "line": stragglers_line(document["summaries"]["stragglers"]),
        }

    # THEN the in-memory host skew compares whole steps only: each host's first and last step
    # (which the straggler rows keep) are left out
    want = skew(memory)
    steps = [row["step"] for row in want["rows"]]
    every = {row["step"] for row in memory["stragglers"]}
    assert steps and want["total"] == len(steps) == len(every) - 2
    assert min(every) not in steps and max(every) not in steps
    if slow:
        assert want["summary"]["slowest_host"] == want["stragglers"]["slowest_host"] == "host-2"
        assert want["line"] is not None and "host-2" in want["line"]
    # AND the pod's host skew, its summary and the straggler finding are the same, both ways
    assert skew(written) == want
    assert skew(read) == want


@pytest.mark.parametrize("slow", [{}, {"host-2": {"stretch": STRETCH}}], ids=["even", "straggler"])
def test_a_pods_per_host_step_figures_count_the_whole_steps_its_hosts_in_memory_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow: dict
) -> None:
    # GIVEN four hosts, copies of a real CPU capture whose first and last steps the capture
    # window cuts (host-2 stretched 1.5x, a straggler, in the second case)
    markers = pod_logdir(tmp_path, 4, slow)
    # WHEN it is analyzed in memory, as a pod (its caches written), and as a pod again (the
    # caches read back)
    memory, written, read = _three_ways(tmp_path, monkeypatch)
    # the whole steps the in-memory document compares: neither a host's first nor its last
    whole = sorted({row["step"] for row in memory["host_skew"]})
    every = {row["step"] for row in memory["stragglers"]}
    assert whole and min(every) < whole[0] and whole[-1] < max(every)
    # each host's walls at those steps, marker to marker in its own capture; the in-memory
    # host skew's fastest and slowest host at each step have them
    walls = {
        host: {step: wall for step, wall in marker_walls(ends).items() if step in whole}
        for host, ends in markers.items()
    }
    for row in memory["host_skew"]:
        assert walls[row["fastest_host"]][row["step"]] == pytest.approx(row["fastest_ms"])
        assert walls[row["slowest_host"]][row["step"]] == pytest.approx(row["slowest_ms"])
    # THEN each host's step figures in trace.pod are those of its whole steps, both ways
    for document in (written, read):
        figures = {host["host"]: host["steps"] for host in document["trace"]["pod"]["hosts"]}
        assert sorted(figures) == sorted(walls)
        for host, got in figures.items():
            mine = walls[host]
            assert sorted(mine) == whole and got["count"] == len(whole)
            fastest = min(mine, key=lambda step: (mine[step], step))
            slowest = sorted(mine, key=lambda step: (-mine[step], step))
            assert got["fastest_step"] == fastest
            assert got["fastest_ms"] == pytest.approx(mine[fastest])
            assert got["slowest_step"] == slowest[0]
            assert got["slowest_ms"] == pytest.approx(mine[slowest[0]])
            assert got["mean_ms"] == pytest.approx(sum(mine.values()) / len(mine))
            assert [item["step"] for item in got["slowest"]] == slowest[:5]
    # AND a pod read as load_trace returns it, whose step times keep every step, counts every
    # step: its figures are those of its own step times
    lazy = load_trace(tmp_path, lazy=True, workers=2)
    times = lazy.step_times()
    for host in lazy.events_source.load_record(lazy)["hosts"]:
        mine = times[times["host"] == host["host"]]
        assert host["steps"]["count"] == len(mine) == len(whole) + 2
        assert host["steps"]["fastest_ms"] == pytest.approx(mine["wall_ms"].min())


def test_a_host_with_no_whole_step_has_no_step_figures_not_zeros() -> None:
    import pandas as pd

    from xlaprof.model.pod import HostSummary, PodLoad
    from xlaprof.tables.step_stats import host_aggregates

    # GIVEN a host whose capture holds two host steps, both cut by the capture window
    host_steps = pd.DataFrame(
        {"host": ["h0", "h0"], "device": ["host", "host"], "step": [3, 4], "wall_ms": [9.0, 2.0]}
    )
    devices = pd.DataFrame({"device": pd.Series(dtype=str), "step": pd.Series(dtype="Int64")})
    aggregates = host_aggregates(host_steps, devices, pd.DataFrame(), {})
    load = PodLoad([HostSummary("h0", "h0.xplane.pb", 2, None, pd.DataFrame(), None, aggregates)])
    # WHEN the load's record tells of its whole steps (a trace cut mid-step), and of every step
    (cut,) = [host["steps"] for host in load.record(True)["hosts"]]
    (kept,) = [host["steps"] for host in load.record(False)["hosts"]]
    # THEN it has none: no figures (None), never 0.0 nor a step named fastest
    assert cut["count"] == 0 and cut["slowest"] == []
    names = ("mean_ms", "std_ms", "fastest_ms", "fastest_step", "slowest_ms", "slowest_step")
    assert all(cut[name] is None for name in (*names, "median_ms", "p90_ms"))
    # AND every step's figures keep both steps, as step times that keep them do
    assert (kept["count"], kept["fastest_step"], kept["slowest_step"]) == (2, 4, 3)
    assert (kept["fastest_ms"], kept["slowest_ms"]) == (2.0, 9.0)
