"""Verdicts the corpus depends on, on fixed inputs (no timing of this machine).

tracing_bound's margins (host >= 1.5x device and device idle >= 30% of the step), per-site
warm-up, and the source rules that place a recompilation at the line making the changing input.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xlaprof.analyzers import recompilation, tracing_bound
from xlaprof.analyzers.recompilation.sites import split_warmup
from xlaprof.analyzers.shared.sourcecode import argument_origin, loop_reassignment, time_loop_sketch
from xlaprof.findings import Location, Severity
from xlaprof.model.input import AnalysisInput
from xlaprof.parse.debug_log import DebugEvent
from xlaprof.parse.frames import Frame
from xlaprof.rundir.schema import StepRow


@pytest.fixture(autouse=True)
def _sources_under_tmp_path(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Source lines are read only under a source root (issue 16): here, the test's folder."""
    from xlaprof.inputs.sourcefiles import source_roots

    with source_roots(tmp_path):
        yield


def steps(host: float, device: float, wall: float, count: int = 8) -> list[StepRow]:
    return [
        StepRow(step=i, wall_s=wall, host_cpu_s=host, executions=1, execute_s=device)
        for i in range(count)
    ]


@pytest.mark.parametrize(
    ("host", "device", "wall", "expected"),
    [
        # the healthy torch_xla.compile loop: host 1.04x device: no verdict
        (1.04e-3, 1.0e-3, 1.5e-3, None),
        # host 2x device but the device is busy 80% of the step: no verdict
        (2.0e-3, 1.0e-3, 1.25e-3, None),
        # host 2x device, device idle 50%: a warning
        (2.0e-3, 1.0e-3, 2.0e-3, Severity.WARNING),
        # host 1.6x device, device idle 37.5%: a note
        (1.6e-3, 1.0e-3, 1.6e-3, Severity.INFO),
    ],
)
def test_tracing_bound_margins(host, device, wall, expected) -> None:
    findings = tracing_bound.analyze(AnalysisInput(steps=steps(host, device, wall)))
    assert [f.severity for f in findings] == ([] if expected is None else [expected])


def test_tracing_bound_is_placed_where_host_cpu_goes_not_at_the_sync(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("x = step(x)\ntorch_xla.sync()\n")
    samples = {f"{script}:2": 0.6, f"{script}:1": 0.3, "<library>": 0.1}
    data = AnalysisInput(steps=steps(3e-3, 1e-3, 3e-3), host_samples={i: samples for i in range(8)})
    (finding,) = tracing_bound.analyze(data)
    assert finding.location == Location(str(script), 1)


def test_tracing_bound_shows_the_syncs_share_only_where_it_was_recorded() -> None:
    # GIVEN steps of 3 ms host CPU, 0.4-0.6 ms of it inside the sync that ended them
    rows = steps(3e-3, 1e-3, 3e-3)
    for row, in_sync in zip(rows, [4e-4, 5e-4, 6e-4, 5e-4, 4e-4, 6e-4, 5e-4, 5e-4], strict=True):
        row.sync_cpu_s = in_sync
    (finding,) = tracing_bound.analyze(AnalysisInput(steps=rows))
    assert finding.evidence["host_seconds_in_sync_per_step"] == 5e-4  # the median
    assert finding.evidence["host_seconds_per_step"] == 3e-3  # the verdict's basis is unchanged
    # a run without the split (older runs, xlaprof.step marks) has no such key, not a 0
    (finding,) = tracing_bound.analyze(AnalysisInput(steps=steps(3e-3, 1e-3, 3e-3)))
    assert "host_seconds_in_sync_per_step" not in finding.evidence


def event(kind: str, line: int = 10) -> DebugEvent:
    return DebugEvent(kind=kind, frames=[Frame("main", "/home/u/train.py", line)])  # type: ignore[arg-type]


def test_warmup_is_judged_per_site() -> None:
    c, e = "compilation", "execution"
    # optimizer state on the site's second call: warm-up, even if that call is at step 7
    warm, late = split_warmup([event(c), event(e), event(c), event(e), event(e)])
    assert (len(warm), len(late)) == (2, 0)
    # a new graph after the site once reused a cached one: a recompilation
    warm, late = split_warmup([event(c), event(e), event(e), event(c), event(e)])
    assert (len(warm), len(late)) == (1, 1)
    # a first graph of no inputs (total = torch.zeros(...) flushed by the loop's first sync)
    # is set-up: the two graphs after it are still warm-up
    setup = DebugEvent(kind="compilation", graph_inputs=0, frames=event(c).frames)
    warm, late = split_warmup([setup, event(e), event(c), event(e), event(c), event(e), event(e)])
    assert (len(warm), len(late)) == (3, 0)
    # every call compiles: beyond two, recompilations
    warm, late = split_warmup([event(k) for _ in range(5) for k in (c, e)])
    assert (len(warm), len(late)) == (2, 3)


def test_a_site_with_warmup_only_gets_no_finding() -> None:
    c, e = "compilation", "execution"
    events = [event(c), event(e), event(c), event(e), *[event(e) for _ in range(6)]]
    assert recompilation.analyze(AnalysisInput(debug=_log(events))) == []


def _log(events):  # type: ignore[no-untyped-def]
    from xlaprof.parse.debug_log import DebugLog

    return DebugLog(events=events)


SOURCE = """\
def main():
    tokens = start()
    for step in range(8):
        nxt = model(tokens)
        tokens = torch.cat([tokens, nxt], 1)
        torch_xla.sync()
    for step in range(8):
        x = make(step)
        loss = step_fn(x)
    for x, y in loader:
        pass


def forward(self, seq):
    h = zeros()
    for t in range(seq.shape[1]):
        h = self.cell(seq[:, t], h)
    return h
"""


def test_source_rules(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    file = str(path)
    # created before the loop at line 2, rebound in it at line 5
    assert loop_reassignment(file, 2, 6) == 5
    # the argument of `loss = step_fn(x)` was last bound at line 8
    assert argument_origin(file, 9, 0) == 8
    # a loop header takes its values from the iteration itself
    assert argument_origin(file, 10, 0) is None
    sketch = time_loop_sketch(file, 17)
    assert sketch is not None
    assert "params = dict(self.cell.named_parameters())" in sketch
    assert "h = functional_call(self.cell, params, (x_t, h))" in sketch
    assert "(h, _), outputs = scan(step, (h, params), seq.movedim(1, 0))" in sketch


def test_stack_units_from_the_module_tree() -> None:
    from xlaprof.analyzers.unrolled_loop import _units as repeating_units

    linear, gelu, head = ("Linear", "64x64;64"), ("GELU", ""), ("Linear", "1x64;1")
    # a Sequential of 16 (Linear, GELU) and a head: 16 units of period 2
    assert repeating_units([linear, gelu] * 16 + [head]) == (0, 2, 16)
    # an embedding, 12 blocks, a head: 12 units of period 1 from child 1
    assert repeating_units([("Embedding", "9x4"), *[("Block", "4x4")] * 12, head]) == (1, 1, 12)
    # nothing repeats
    assert repeating_units([linear, ("ReLU", ""), head]) == (0, 3, 1)


def test_a_module_called_n_times_is_a_time_loop(tmp_path: Path) -> None:
    from xlaprof.analyzers.unrolled_loop import _match_modules as match_modules

    path = tmp_path / "model.py"
    path.write_text(SOURCE)
    modules = {
        "stacks": [],
        "repeated": [
            {
                "name": "cell",
                "class": "GRUCell",
                "file": "/x/torch/nn/modules/rnn.py",
                "calls": 24,
                "sites": [{"where": f"{path}:17", "direct": True}],
            }
        ],
    }
    match = match_modules(modules, 23, {"/x/torch/nn/modules/rnn.py"})
    assert match is not None and match.kind == "time"
    assert match.location == Location(str(path), 16) and match.call == Location(str(path), 17)
    # a repeat count far from the call count is not this loop
    assert match_modules(modules, 12, set()) is None
