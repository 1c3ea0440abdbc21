"""Warm-up is the first ``warmup_steps`` steps by position, whatever their numbers; in a capture
numbered from elsewhere that measured its compiles, its leading steps that compiled.

Inputs are real captures whose steps are not numbered from 0: the JAX-on-CPU capture of a job's
steps 100 to 109 (sample_traces/jax_cpu: the script's own record, ``capture_jax_cpu.json``, says
which steps it annotated, which one compiled first and which compiled again) and TorchTPU's live
capture of ``step_48`` to ``step_147`` ranges (``../shared/traces/torchtpu``, decoded here with
``tests/decode.py``). Expected values come from those records and decodes, not from xlaprof.
The JAX capture's first step compiled the training step and the next reused it (the record's
``compiled_shapes``: one compile of the first shape, one of the reshaped batch): its first step
alone is warm-up. A capture that began after its job warmed up (a run's trace window of steps
4 and 5, whose ``steps.jsonl`` says they compiled nothing) has no warm-up step. Every table
(the story, the step timeline, the steady step, the host table, a cut timeline), the findings
and the console, JSON and HTML reports must name the same warm-up steps.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from decode import decode_xspace
from helpers import TRACES, jax_cpu_sample, sample_capture, sample_run

from xlaprof.model.request import AnalysisRequest
from xlaprof.model.result import AnalysisResult, PartResult
from xlaprof.pipeline import analyze
from xlaprof.report import RenderOptions, renderer_for
from xlaprof.tables import bounded

WARMUP = 2  # the default of --warmup-steps
LIVE = TRACES / "torchtpu" / "live_capture_step_n.xplane.pb"


@pytest.fixture(scope="module")
def jax_record() -> dict[str, Any]:
    return json.loads(jax_cpu_sample("capture_jax_cpu.json").read_text())


def _jax_warm(record: dict[str, Any]) -> list[int]:
    """The capture's warm-up, from the script's own record: its first step compiled (the
    jitted step's first call) and the steps after it reused that graph until the reshaped one
    (one compile per shape in ``compiled_shapes``), so the leading compiling steps are one."""
    annotated = record["steps_annotated"]
    assert len(record["compiled_shapes"]) == 2 and record["reshape_step"] != annotated[1]
    return annotated[:1]


@pytest.fixture(scope="module")
def jax_result() -> AnalysisResult:
    return analyze(AnalysisRequest((jax_cpu_sample(),)))


@pytest.fixture(scope="module")
def live_steps() -> list[int]:
    """The live capture's step numbers in the order its ``step_N`` ranges began."""
    if not LIVE.is_file():
        pytest.skip(f"{LIVE}: a TorchTPU capture (../shared/traces/torchtpu/README.md)")
    ranges = sorted(
        (e.start_ns, e.name)
        for e in decode_xspace(LIVE).events
        if re.fullmatch(r"step_\d+", e.name)
    )
    return [int(name.split("_")[1]) for _, name in ranges]


@pytest.fixture(scope="module")
def live_result(live_steps: list[int]) -> AnalysisResult:
    return analyze(AnalysisRequest((LIVE,)))


def _part(result: AnalysisResult) -> PartResult:
    assert len(result.parts) == 1
    return result.parts[0]


def _steady_in_timeline(part: PartResult) -> list[int]:
    timeline = part.every_row.get("timeline", part.timeline)
    assert timeline is not None
    return [int(s) for s in timeline[timeline["steady"].astype(bool)]["step"]]


def _render(result: AnalysisResult, name: str) -> str:
    out = io.StringIO()
    renderer_for(result, name).write(result, out, RenderOptions(width=200))
    return out.getvalue()


def test_a_jax_capture_numbered_from_100_warms_up_in_its_first_steps(jax_record, jax_result):
    # GIVEN a capture of steps 100..109 whose first step compiled the training step and whose
    # reshaped step compiled again (the script's own record)
    annotated = jax_record["steps_annotated"]
    assert annotated[0] != 0
    warm, reshaped = _jax_warm(jax_record), jax_record["reshape_step"]
    expected = [s for s in annotated[len(warm) :] if s != reshaped]
    part = _part(jax_result)
    story = part.story
    assert story is not None and part.steady is not None
    # THEN the story counts the first step as warm-up, with its compile in it
    assert story.warmup_steps == len(warm)
    assert story.warmup_compile_s and story.warmup_compile_s > 0
    # and only the reshaped step compiled again after warm-up, not the first step
    assert story.later_compile_steps == [reshaped]
    assert annotated[0] not in story.later_compile_steps
    # THEN the timeline's steady steps, the story's and the steady step agree: after warm-up,
    # compiling nothing
    assert _steady_in_timeline(part) == expected
    assert story.steady_steps == part.steady.steps == len(expected)
    assert story.median_step in expected and part.steady.median_step == story.median_step


def test_a_jax_capture_numbered_from_100_shows_the_same_warm_up_in_every_report(
    jax_record, jax_result
):
    annotated = jax_record["steps_annotated"]
    warm, reshaped = _jax_warm(jax_record), jax_record["reshape_step"]
    steady = len([s for s in annotated[len(warm) :] if s != reshaped])
    text = _render(jax_result, "console")
    # THEN the console's story: one warm-up step, the reshaped step alone compiled again
    assert f"{len(annotated)} steps: {len(warm)} warm-up step(s)" in text
    assert f"{steady} steady" in text
    assert re.search(rf"Compiled again after warm-up in step\(s\) {reshaped} \(", text)
    # and its step timeline lists the warm-up steps first, then the median steady step
    timeline = text.split("Step timeline (ms)", 1)[1].splitlines()
    labels = [line.split()[0] for line in timeline[3:] if line.strip()]
    assert labels[: len(warm) + 1] == [*(str(s) for s in warm), str(part_median(jax_result))]
    # THEN the JSON document's story and timeline say the same
    document = json.loads(_render(jax_result, "json"))
    assert document["story"]["warmup_steps"] == len(warm)
    assert document["story"]["later_compile_steps"] == [reshaped]
    steady_rows = [row["step"] for row in document["timeline"] if row["steady"]]
    assert len(steady_rows) == steady and not set(warm) & set(steady_rows)
    # and the HTML report's story
    html = _render(jax_result, "html")
    assert f"{len(warm)} warm-up step(s)" in html
    assert re.search(rf"after warm-up in step\(s\) {reshaped}\b", html)


def part_median(result: AnalysisResult) -> int:
    story = _part(result).story
    assert story is not None and story.median_step is not None
    return story.median_step


def test_a_cut_timeline_keeps_the_first_steps_by_position_as_warm_up(
    jax_record, jax_result, monkeypatch
):
    # GIVEN the capture's whole timeline, cut to a bound smaller than its rows
    annotated = jax_record["steps_annotated"]
    timeline = _part(jax_result).every_row.get("timeline", _part(jax_result).timeline)
    monkeypatch.setattr(bounded, "MAX_TIMELINE_ROWS", 6)
    monkeypatch.setattr(bounded, "TIMELINE_FIRST_STEPS", 0)
    monkeypatch.setattr(bounded, "TIMELINE_TRACED_SHOWN", 1)
    kept, told = bounded.thin_timeline(timeline, WARMUP, None)
    assert told is not None
    steps = [int(s) for s in kept["step"]]
    # THEN it keeps the warm-up step (the first) and the first traced step after it
    warm = _jax_warm(jax_record)
    assert steps[: len(warm) + 1] == annotated[: len(warm) + 1]


def test_a_live_torchtpu_capture_from_step_48_warms_up_in_its_first_steps(live_steps, live_result):
    # GIVEN TorchTPU's live capture of a job's steps, not numbered from 0
    assert live_steps[0] != 0
    warm, after = live_steps[:WARMUP], live_steps[WARMUP:]
    part = _part(live_result)
    story, view = part.story, part.host_view
    assert story is not None and view is not None and part.steady is not None
    # THEN the story, the timeline, the steady step and the host table agree: the first two
    # captured steps are warm-up (no compile is measured in this capture)
    assert story.warmup_steps == len(warm)
    assert view.warmup_steps == warm
    assert _steady_in_timeline(part) == after
    assert view.steady_steps == after
    assert story.steady_steps == part.steady.steps == len(after)
    assert view.median_step == story.median_step == part.steady.median_step
    assert story.median_step in after
    # and the console says so
    text = _render(live_result, "console")
    assert f"{len(live_steps)} steps: {len(warm)} warm-up step(s), {len(after)} steady" in text


def test_a_capture_window_that_compiled_nothing_in_its_first_step_has_no_warm_up():
    # GIVEN a run's --trace-steps capture analyzed alone: the run's own records (run.json,
    # steps.jsonl) say which steps it holds and that they compiled nothing
    run = sample_run("healthy_loop")
    (info,) = run.glob("*/run.json")
    start, stop = json.loads(info.read_text())["trace_steps"]
    rows = [json.loads(line) for line in (info.parent / "steps.jsonl").read_text().splitlines()]
    window = [r["step"] for r in rows if start <= r["step"] < stop]
    assert window[0] != 0 and not any(r["compiles"] for r in rows if r["step"] in window)
    part = _part(analyze(AnalysisRequest((sample_capture("healthy_loop"),))))
    story = part.story
    assert story is not None and part.steady is not None
    # THEN it began in steady state: no warm-up step, every step steady in every table
    assert story.warmup_steps == 0
    assert _steady_in_timeline(part) == window
    assert story.steady_steps == part.steady.steps == len(window)
