"""dynamo.jsonl records -> typed records -> graph-break and torch.compile recompile findings.

The messages are dynamo's own text, printed by torch 2.9 for a function compiled with
backend="openxla" fed 16, 12 and 9 rows and branching on a tensor value (captured on this
machine with the recompiles/graph_breaks artifacts on).
"""

from __future__ import annotations

from xlaprof.analyzers import graph_break, recompilation
from xlaprof.findings import Kind, Location
from xlaprof.model.input import AnalysisInput
from xlaprof.parse.dynamo_log import SizeMismatch, parse_dynamo_records

FILE = "/home/user/train.py"
BREAK = (
    f"Graph break in user code at {FILE}:30\n"
    "Graph Break Reason: Data-dependent branching\n"
    "  Explanation: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). Dynamo "
    "does not support tracing dynamic control flow.\n"
    "  Hint: This graph break is fundamental - it is unlikely that Dynamo will ever be able to "
    "trace through your code. Consider finding a workaround.\n"
    "  Hint: Use `torch.cond` to express dynamic control flow.\n\n"
    "  Developer debug context: attempted to jump with TensorVariable()\n\n"
    "User code traceback:\n"
    f'  File "{FILE}", line 38, in <module>\n    out = compiled(x)\n'
)
SUPPRESSED = (
    "Graph break (user stack suppressed due to duplicate graph break) in user code at "
    f"{FILE}:30\nGraph Break Reason: Data-dependent branching\n"
)
RECOMPILE_1 = (
    f"Recompiling function fwd in {FILE}:28\n"
    "    triggered by the following guard failure(s):\n"
    "    - 0/0: tensor 'x' size mismatch at index 0. expected 16, actual 12"
)
RECOMPILE_2 = (
    f"Recompiling function fwd in {FILE}:28\n"
    "    triggered by the following guard failure(s):\n"
    "    - 0/1: tensor 'x' size mismatch at index 0. expected 12, actual 9\n"
    "    - 0/0: tensor 'x' size mismatch at index 0. expected 16, actual 9"
)
CALL = [f"{FILE}:38"]
ROWS = [
    {"kind": "compile", "compile_id": "0/0", "seconds": 1.2, "user_frames": CALL, "step": 0},
    {"kind": "graph_break", "message": BREAK, "user_frames": CALL, "step": 0},
    {"kind": "recompile", "message": RECOMPILE_1, "user_frames": CALL, "step": 1},
    {"kind": "compile", "compile_id": "0/1", "seconds": 0.8, "user_frames": CALL, "step": 1},
    {"kind": "graph_break", "message": SUPPRESSED, "user_frames": CALL, "step": 1},
    {"kind": "recompile", "message": RECOMPILE_2, "user_frames": CALL, "step": 2},
    {"kind": "compile", "compile_id": "0/2", "seconds": 0.7, "user_frames": CALL, "step": 2},
    {"kind": "something new", "message": "ignored"},
]


def test_records_are_read_from_dynamos_messages() -> None:
    records = parse_dynamo_records(ROWS)
    kinds = ["compile", "graph_break", "recompile"]
    assert [r.kind for r in records] == [*kinds, *kinds, "compile"]
    first = records[2]
    assert (first.function, first.code, first.step) == ("fwd", f"{FILE}:28", 1)
    assert first.mismatch == SizeMismatch("x", 0, 16, 12)
    second = records[5]
    # the newest cache entry's failure comes first: what changed since the last compile
    assert second.reason == "tensor 'x' size mismatch at index 0. expected 12, actual 9"
    assert first.cause == second.cause == "tensor 'x' size mismatch at index 0"
    assert records[1].code == f"{FILE}:30" and records[1].reason == "Data-dependent branching"
    assert records[4].code == f"{FILE}:30"


def test_one_graph_break_finding_per_line_and_reason() -> None:
    data = AnalysisInput(dynamo=parse_dynamo_records(ROWS))
    (finding,) = graph_break.analyze(data)
    assert finding.kind == Kind.GRAPH_BREAK
    assert finding.location == Location(FILE, 30)
    assert finding.evidence["breaks"] == 2 and finding.evidence["steps"] == [0, 1]
    assert "torch.cond" in finding.suggestion


def test_one_recompile_finding_per_cause_with_the_sizes_seen() -> None:
    data = AnalysisInput(dynamo=parse_dynamo_records(ROWS))
    (finding,) = recompilation.analyze(data)
    assert finding.kind == Kind.RECOMPILATION
    evidence = finding.evidence
    assert evidence["sizes_seen"] == [16, 12, 9]
    assert evidence["recompiles"] == 2 and evidence["recompile_steps"] == [1, 2]
    assert evidence["dynamo_compiles_at_call"] == 3
    assert evidence["call_site"] == f"{FILE}:38"
    # the source is not readable here, so the finding stays at the call
    assert finding.location == Location(FILE, 38)
    assert "mark_dynamic" in finding.suggestion
