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
