"""The source rules (``xlaprof.analyzers.shared.sourcecode``) that place a recompilation at
the line making the changing input, and sketch a time loop as a scan."""

from __future__ import annotations

from pathlib import Path

from builders import TRAINING_SOURCE

from xlaprof.analyzers.shared.sourcecode import argument_origin, loop_reassignment, time_loop_sketch
from xlaprof.model.sources import SourceFiles


def test_source_rules(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(TRAINING_SOURCE)
    file = str(path)
    sources = SourceFiles([tmp_path])  # read only under a source root (issue 16): the test's
    # created before the loop at line 2, rebound in it at line 5
    assert loop_reassignment(sources, file, 2, 6) == 5
    # the argument of `loss = step_fn(x)` was last bound at line 8
    assert argument_origin(sources, file, 9, 0) == 8
    # a loop header takes its values from the iteration itself
    assert argument_origin(sources, file, 10, 0) is None
    sketch = time_loop_sketch(sources, file, 17)
    assert sketch is not None
    assert "params = dict(self.cell.named_parameters())" in sketch
    assert "h = functional_call(self.cell, params, (x_t, h))" in sketch
    assert "(h, _), outputs = scan(step, (h, params), seq.movedim(1, 0))" in sketch


LOOPS = """\
for t in scheduler.timesteps:
    noise = model(sample, t).sample
    sample = scheduler.step(noise, t, sample).prev_sample
for _ in range(8):
    x = x + dt * field(x)
for t in range(seq.size(1)):
    h = cell(seq[:, t], h)
for i in range(4):
    if i > 2:
        x = x * 2
"""


def test_a_loop_body_says_where_its_loop_value_reaches_python(tmp_path: Path) -> None:
    # GIVEN four loops: the value passed to calls (a sampling loop), unused (an ODE solver),
    # only indexing a tensor (a time loop), tested in an `if`
    from xlaprof.analyzers.shared.sourcecode import loop_body

    path = tmp_path / "loops.py"
    path.write_text(LOOPS)
    sources = SourceFiles([tmp_path])
    sampling, solver, time_loop, branch = (loop_body(sources, str(path), n) for n in (1, 4, 6, 8))
    # THEN only the calls and the test are host uses, each with its line; the body's last line
    # is where a sync per iteration goes
    assert sampling is not None and sampling.header == "for t in scheduler.timesteps:"
    assert sampling.host_uses == (
        "`t` passed to model() (line 2)",
        "`t` passed to scheduler.step() (line 3)",
    )
    assert sampling.last_line == 3
    assert solver is not None and solver.host_uses == ()
    assert time_loop is not None and time_loop.host_uses == ()
    assert branch is not None and branch.host_uses == ("`i` tested (line 9)",)
    assert branch.last_line == 10
    assert loop_body(sources, str(path), 2) is None  # not a loop header


def test_a_loop_that_calls_its_variable_is_a_loop_over_layers(tmp_path: Path) -> None:
    # GIVEN `for block in self.blocks: x = block(x)` (the variable is called, not passed)
    from xlaprof.analyzers.shared.sourcecode import loop_body

    path = tmp_path / "stack.py"
    path.write_text("for block in blocks:\n    x = block(x)\n")
    body = loop_body(SourceFiles([tmp_path]), str(path), 1)
    # THEN it is a loop over layers, and calling the layer is no host use of it
    assert body is not None and body.calls_variable and body.host_uses == ()
