"""What the compile analyzers say of a capture that holds compile spans but no compile records.

A capture's compile spans (``xlaprof.tables.timeline.compile_spans``: JAX's and the PJRT C
API's compile calls, torch_xla's ``XLAGraphExecutor::Compile``) time each compile on the host
(the step timeline's compile column reads those in its steps), but they name no graph and are
none of the records ``slow_compile`` and ``recompilation`` read (CompileTime metrics, a debug
log's compilation events, a run's step rows, torch.compile's records). Their ``unmeasured``
reason says so, with the spans' count, instead of "no compilation data in the input".
"""

from __future__ import annotations

from xlaprof.model.input import AnalysisInput
from xlaprof.tables.timeline import compile_spans

NO_DATA = "no compilation data in the input"


def capture_compile_spans(data: AnalysisInput) -> int:
    """The compiles the compile spans of the capture ``data`` holds in memory time (0: none,
    or no capture)."""
    trace = data.trace
    if trace is None:
        return 0
    return compile_spans(trace.events_source.held_events())


def spans_note(spans: int) -> str:
    """``spans`` compile spans, as the reasons name them."""
    return f"the capture's {spans} compile span{'s' if spans != 1 else ''}"
