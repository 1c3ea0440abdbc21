"""Graph breaks from dynamo's records (``xlaprof.analyzers.graph_break``): one finding per
line and reason."""

from __future__ import annotations

from helpers import dynamo_rows

from xlaprof.analyzers import graph_break
from xlaprof.findings import Kind, Location
from xlaprof.model.input import AnalysisInput
from xlaprof.parse.dynamo_log import parse_dynamo_records

FILE = "/home/user/train.py"  # the script dynamo's messages in tests/data/dynamo.jsonl name
ROWS = dynamo_rows()


def test_one_graph_break_finding_per_line_and_reason() -> None:
    data = AnalysisInput(dynamo=parse_dynamo_records(ROWS))
    (finding,) = graph_break.analyze(data)
    assert finding.kind == Kind.GRAPH_BREAK
    assert finding.location == Location(FILE, 30)
    assert finding.evidence["breaks"] == 2 and finding.evidence["steps"] == [0, 1]
    assert "torch.cond" in finding.suggestion
